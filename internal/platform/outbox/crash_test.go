package outbox_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/onceonly/onceonly/internal/platform/db"
	"github.com/onceonly/onceonly/internal/platform/lock"
	"github.com/onceonly/onceonly/internal/platform/outbox"
	"github.com/onceonly/onceonly/internal/platform/testkit"
)

// childEnv makes the test binary a relay process that stops dead at the
// crash point: after the broker acknowledged its first batch, before the mark.
const (
	childEnv    = "OUTBOX_TEST_CHILD"
	crashMarker = "OUTBOX_CRASH_POINT"
)

func childRelay() int {
	fail := func(err error) int { fmt.Fprintln(os.Stderr, "child:", err); return 1 }
	ctx := context.Background()
	gdb, err := db.Open(ctx, os.Getenv("CHILD_DSN"), db.Options{MaxOpenConns: 4})
	if err != nil {
		return fail(err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	locker, err := lock.New(lock.Config{Addrs: []string{os.Getenv("CHILD_REDIS")}, DB: gdb,
		KeyPrefix: os.Getenv("CHILD_PREFIX"), Expiry: 2 * time.Second, Logger: log})
	if err != nil {
		return fail(err)
	}
	batch, _ := strconv.Atoi(os.Getenv("CHILD_BATCH"))
	r, err := outbox.NewRelay(outbox.RelayConfig{DB: gdb, Locker: locker, Brokers: strings.Split(os.Getenv("CHILD_BROKERS"), ","),
		BatchSize: batch, PollInterval: 50 * time.Millisecond, Logger: log})
	if err != nil {
		return fail(err)
	}
	outbox.SetAfterPublish(r, func(ids []string) {
		// Acknowledged by the broker, not yet marked: announce it and stay
		// here until the parent's SIGKILL.
		fmt.Printf("%s acked=%d first=%s last=%s\n", crashMarker, len(ids), ids[0], ids[len(ids)-1])
		time.Sleep(time.Hour)
	})
	if err := r.Run(ctx); err != nil {
		return fail(err)
	}
	return 0
}

func TestRelay_CrashBetweenPublishAndMarkRepublishesAndLosesNothing(t *testing.T) {
	t.Parallel()
	gdb, dsn := openDB(t, 6)
	rdb, prefix := testkit.Redis(t)
	brokers := testkit.Kafka(t, topic)
	const n, batch = 60, 25
	addN(t, gdb, "crash", n, 7)

	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	child := testkit.Start(t, exe, []string{
		childEnv + "=1", "CHILD_DSN=" + dsn, "CHILD_REDIS=" + rdb.Options().Addr, "CHILD_PREFIX=" + prefix,
		"CHILD_BROKERS=" + strings.Join(brokers, ","), "CHILD_BATCH=" + strconv.Itoa(batch),
	}, "-test.run=^$")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	line, ok := child.WaitLine(ctx, crashMarker)
	if !ok {
		t.Fatalf("child never reached the crash point:\n%s", child.Output())
	}
	if err := child.Cmd.Process.Kill(); err != nil { // SIGKILL: no deferred code, no graceful mark
		t.Fatal(err)
	}
	if code := child.Wait(10 * time.Second); code == 0 {
		t.Fatalf("child exited with %d after SIGKILL", code)
	}
	t.Logf("killed the relay at: %s", line)

	// The broker has the batch, the table does not know it.
	if onTopic := len(readTopic(t, brokers, topic)); onTopic != batch {
		t.Fatalf("%d messages on the topic at the crash, want the acknowledged batch of %d", onTopic, batch)
	}
	if marked := count(t, gdb, "published_at IS NOT NULL"); marked != 0 {
		t.Fatalf("%d rows marked although the relay died before marking", marked)
	}

	// A new relay (after the dead one's lease expires) publishes everything.
	r, reg := newRelay(t, outbox.RelayConfig{DB: gdb, Locker: locker(t, gdb, rdb.Options().Addr, prefix),
		Brokers: brokers, BatchSize: batch, PollInterval: 50 * time.Millisecond, Logger: testkit.Logger(t)})
	startRelay(t, r)
	waitPublished(t, gdb, n, 60*time.Second)

	dups := checkTopic(t, readTopic(t, brokers, topic), rowIDs(t, gdb))
	t.Logf("crash between publish and mark: %d events, %d duplicates on the topic (the batch acknowledged before the kill), published_total=%v",
		n, dups, metricValue(t, reg, "onceonly_outbox_published_total"))
	if dups != batch {
		t.Errorf("want exactly the acknowledged-but-unmarked batch (%d) republished, got %d duplicates", batch, dups)
	}
}
