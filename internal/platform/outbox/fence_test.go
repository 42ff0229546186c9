package outbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/onceonly/onceonly/internal/platform/lock"
	"github.com/onceonly/onceonly/internal/platform/outbox"
	"github.com/onceonly/onceonly/internal/platform/testkit"
)

func TestRelay_SupersededRelayCannotMarkAndTheNewHolderPublishesItsRows(t *testing.T) {
	t.Parallel()
	gdb, _ := openDB(t, 8)
	rdb, prefix := testkit.Redis(t)
	brokers := testkit.Kafka(t, topic)
	const n = 30
	addN(t, gdb, "fence", n, 4)

	// Relay A stops after its publish, before its mark.
	published, release := make(chan struct{}), make(chan struct{})
	fencedAt := make(chan int64, 1)
	a, regA := newRelay(t, outbox.RelayConfig{DB: gdb, Locker: locker(t, gdb, rdb.Options().Addr, prefix+"a:"),
		Brokers: brokers, Logger: testkit.Logger(t).With("relay", "A")})
	first := true
	outbox.SetAfterPublish(a, func([]string) {
		if first {
			first = false
			close(published)
			<-release
		}
	})
	outbox.SetOnFenced(a, func() {
		// Right after the refused mark, before A could run again.
		var marked int64 = -1
		gdb.Raw("SELECT COUNT(*) FROM outbox_events WHERE published_at IS NOT NULL").Scan(&marked)
		fencedAt <- marked
	})
	stopA := startRelay(t, a)
	select {
	case <-published:
	case <-time.After(30 * time.Second):
		t.Fatal("relay A published nothing")
	}

	// Meanwhile another instance becomes the holder and takes a newer token
	// (as after a Redis failover that lost A's key: a separate key here, the
	// same job and fence row).
	lockB := locker(t, gdb, rdb.Options().Addr, prefix+"b:")
	if err := lockB.RunOnce(context.Background(), outbox.DefaultJob, func(context.Context, lock.Fence) error { return nil }); err != nil {
		t.Fatalf("B takes a token: %v", err)
	}
	close(release)
	select {
	case marked := <-fencedAt:
		if marked != 0 {
			t.Fatalf("%d rows marked by the superseded relay", marked)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("relay A's mark was not fenced")
	}
	stopA()
	if got := metricValue(t, regA, "onceonly_outbox_fenced_total"); got != 1 {
		t.Errorf("fenced_total = %v, want 1", got)
	}
	if n := count(t, gdb, "published_at IS NOT NULL"); n != 0 {
		t.Fatalf("%d rows marked after A was fenced", n)
	}

	// B relays: A's unmarked rows go out (again).
	b, _ := newRelay(t, outbox.RelayConfig{DB: gdb, Locker: lockB, Brokers: brokers, Logger: testkit.Logger(t).With("relay", "B")})
	startRelay(t, b)
	waitPublished(t, gdb, n, 30*time.Second)
	dups := checkTopic(t, readTopic(t, brokers, topic), rowIDs(t, gdb))
	t.Logf("fenced relay: %d events, %d duplicates on the topic (A's unmarked publish)", n, dups)
	if dups != n {
		t.Errorf("duplicates = %d, want %d (A published all, B again)", dups, n)
	}
}
