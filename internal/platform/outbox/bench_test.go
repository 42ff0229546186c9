package outbox_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/onceonly/onceonly/internal/platform/db"
	"github.com/onceonly/onceonly/internal/platform/outbox"
	"github.com/onceonly/onceonly/internal/platform/testkit"
)

// BenchmarkRelay measures, in one run, the relay with wake-on-commit (Notify
// after each commit, 1 s poll as fallback) against polling only (1 s poll,
// no Notify), the design default and watermill's default:
//
//   - drain: events/s publishing and marking a backlog of 5,000 committed
//     events (full batches of 100; the mode hardly matters here);
//   - latency: commit → broker acknowledgement, p50/p99/max, for 2,000
//     events committed by 4 writers at about 300 events/s.
//
// Run on real servers with
//
//	TEST_MYSQL_DSN='root:@tcp(127.0.0.1:3306)/' TEST_REDIS_ADDR=127.0.0.1:6379 TEST_REQUIRE_REAL=1 \
//	  go test -run '^$' -bench Relay -benchtime 1x ./internal/platform/outbox/
func BenchmarkRelay(b *testing.B) {
	for _, mode := range []struct {
		name   string
		notify bool
	}{{"wake-on-commit", true}, {"poll-only-1s", false}} {
		b.Run(mode.name, func(b *testing.B) {
			for range b.N {
				benchRelay(b, mode.notify)
			}
		})
	}
}

func benchRelay(b *testing.B, notify bool) {
	const backlog, writers, perWriter = 5000, 4, 500
	gdb, _ := openDB(b, writers+6)
	rdb, prefix := testkit.Redis(b)
	brokers := testkit.Kafka(b, topic)
	lat := newLatencies()
	r, _ := newRelay(b, outbox.RelayConfig{DB: gdb, Locker: locker(b, gdb, rdb.Options().Addr, prefix), Brokers: brokers,
		PollInterval: time.Second})
	outbox.SetAfterPublish(r, lat.ack)

	// Drain: the backlog is committed before the relay starts.
	for i := range backlog / 500 {
		addInOneTx(b, gdb, fmt.Sprintf("drain%d", i), 500, 97)
	}
	start := time.Now()
	stop := startRelay(b, r)
	waitPublished(b, gdb, backlog, 5*time.Minute)
	drain := time.Since(start)

	// Latency: paced commits, each its own transaction.
	var wake func()
	if notify {
		wake = r.Notify
	}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				m := event(fmt.Sprintf("e-lat-%d-%05d", w, i), fmt.Sprintf("order-lat-%d-%d", w, i%20))
				if err := gdb.Transaction(func(tx *gorm.DB) error { return outbox.Add(tx, m) }); err != nil {
					b.Error(err)
					return
				}
				lat.commit(m.EventID, time.Now())
				if wake != nil {
					wake()
				}
				time.Sleep(13 * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	waitPublished(b, gdb, backlog+writers*perWriter, 2*time.Minute)
	stop()
	ls := lat.sorted()
	if len(ls) != writers*perWriter {
		b.Fatalf("%d of %d latencies", len(ls), writers*perWriter)
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	p50, p99, worst := percentile(ls, 50), percentile(ls, 99), ls[len(ls)-1]
	b.ReportMetric(float64(backlog)/drain.Seconds(), "drain-events/s")
	b.ReportMetric(ms(p50), "p50-ms")
	b.ReportMetric(ms(p99), "p99-ms")
	b.ReportMetric(ms(worst), "max-ms")
	b.Logf("%s on %s: drained %d events in %s (%.0f events/s); commit→ack of %d paced events: p50 %s p99 %s max %s",
		map[bool]string{true: "wake-on-commit + 1s poll", false: "poll only, 1s"}[notify], db.DialectOf(gdb),
		backlog, drain.Round(time.Millisecond), float64(backlog)/drain.Seconds(), len(ls),
		p50.Round(time.Microsecond), p99.Round(time.Microsecond), worst.Round(time.Microsecond))
}
