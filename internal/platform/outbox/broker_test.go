package outbox_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/onceonly/onceonly/internal/platform/outbox"
	"github.com/onceonly/onceonly/internal/platform/testkit"
)

func TestRelay_BrokerDownLosesNothingAndKeepsPerKeyOrder(t *testing.T) {
	t.Parallel()
	gdb, _ := openDB(t, 8)
	rdb, prefix := testkit.Redis(t)
	kf := testkit.NewRestartableKafka(t, topic)
	r, reg := newRelay(t, outbox.RelayConfig{DB: gdb, Locker: locker(t, gdb, rdb.Options().Addr, prefix), Brokers: kf.Brokers(),
		PollInterval: 50 * time.Millisecond, Logger: testkit.Logger(t),
		Backoff: func(n int) time.Duration { return min(50*time.Millisecond<<n, time.Second) }})
	startRelay(t, r)

	// Two writers keep committing (keys owned by one writer each, so a
	// key's ids are its commit order) before, during and after the outage.
	var committed atomic.Int64
	ctx, stopWriters := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				m := event(fmt.Sprintf("e-%d-%05d", w, i), fmt.Sprintf("order-%d-%d", w, i%5))
				if err := gdb.Transaction(func(tx *gorm.DB) error { return outbox.Add(tx, m) }); err != nil {
					t.Errorf("commit during the outage: %v", err)
					return
				}
				committed.Add(1)
				r.Notify()
				time.Sleep(10 * time.Millisecond)
			}
		}()
	}
	defer stopWriters()

	waitFor(t, 30*time.Second, "events flowing before the outage", func() bool { return count(t, gdb, "published_at IS NOT NULL") >= 20 })
	beforeOutage := count(t, gdb, "published_at IS NOT NULL")
	kf.Stop()
	committedAtStop := committed.Load()
	const outage = 6 * time.Second
	time.Sleep(outage)
	during := committed.Load() - committedAtStop // before reading the backlog, which only grows
	backlog, oldest, err := outbox.Backlog(context.Background(), gdb)
	if err != nil {
		t.Fatal(err)
	}
	// Commits go on without the broker, and every one of them waits.
	if during == 0 || backlog < during {
		t.Errorf("during %s without a broker %d events were committed, backlog %d: want commits to go on and all of them to wait",
			outage, during, backlog)
	}
	if metricValue(t, reg, "onceonly_outbox_publish_errors_total") == 0 {
		t.Error("no publish error counted during the outage")
	}
	if n := count(t, gdb, "attempts > 0 AND last_error IS NOT NULL"); n == 0 {
		t.Error("no failed attempt recorded on the blocked rows")
	}
	restart := time.Now()
	kf.Start()
	t.Logf("broker down %s: %d events published before, %d committed during it, backlog %d (oldest %s) when it came back",
		outage, beforeOutage, during, backlog, oldest.Round(time.Millisecond))

	time.Sleep(time.Second) // commits continue after the broker returns
	stopWriters()
	wg.Wait()
	waitPublished(t, gdb, committed.Load(), 60*time.Second)
	recovered := time.Since(restart)

	dups := checkTopic(t, readTopic(t, kf.Brokers(), topic), rowIDs(t, gdb))
	t.Logf("after the broker returned: all %d events on the topic within %s, first occurrences in id order per key, %d duplicates",
		committed.Load(), recovered.Round(time.Millisecond), dups)
}
