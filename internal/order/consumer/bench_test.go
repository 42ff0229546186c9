package consumer_test

import (
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/onceonly/onceonly/internal/payment/events"
	"github.com/onceonly/onceonly/internal/platform/db"
	"github.com/onceonly/onceonly/internal/platform/testkit"
)

// BenchmarkConsume_AppliedPerSecondVersusRawLoop measures, in one run, the
// events one consumer applies per second (batches of up to 100 messages of a
// claim in one transaction, from kfake) against a raw loop doing the same
// INSERT consumed_events + CAS UPDATE orders in one transaction per event,
// straight from memory. Meaningful on real MariaDB:
//
//	TEST_MYSQL_DSN='root:@tcp(127.0.0.1:3306)/' TEST_REDIS_ADDR=127.0.0.1:6379 \
//	  go test -run '^$' -bench AppliedPerSecond -benchtime 3x ./internal/order/consumer/
func BenchmarkConsume_AppliedPerSecondVersusRawLoop(b *testing.B) {
	const n = 2000
	for range b.N {
		gdb := testkit.DB(b, 20, migrations()...)
		brokers := testkit.Kafka(b, events.Topic, events.DLQTopic)

		// The baseline: one transaction per event.
		evs := succeeded(seedOrders(b, gdb, n, time.Now()))
		start := time.Now()
		for i, e := range evs {
			err := gdb.Transaction(func(tx *gorm.DB) error {
				if err := tx.Exec(`INSERT INTO consumed_events (event_id, event_type, order_id, payment_id, topic,
  source_partition, source_offset, outcome, deliveries, consumed_at) VALUES (?, ?, ?, ?, ?, 0, ?, 'applied', 1, ?)`,
					e.EventID, e.Type, e.OrderID, e.PaymentID, events.Topic, i, db.Now()).Error; err != nil {
					return err
				}
				return tx.Exec(`UPDATE orders SET status = 'PAID', payment_id = ?, version = version + 1, updated_at = ?
WHERE id = ? AND status = 'PENDING_PAYMENT'`, e.PaymentID, db.Now(), e.OrderID).Error
			})
			if err != nil {
				b.Fatal(err)
			}
		}
		raw := float64(n) / time.Since(start).Seconds()

		// The consumer, joined and warm (one event applied) before the clock starts.
		ids := seedOrders(b, gdb, n+1, time.Now())
		p := newProducer(b, brokers)
		p.events(succeeded(ids[:1])...)
		startConsumer(b, gdb, brokers)
		waitFor(b, 30*time.Second, "the warm-up event", func() bool {
			return count(b, gdb, "SELECT COUNT(*) FROM consumed_events") == n+1
		})
		start = time.Now()
		p.events(succeeded(ids[1:])...)
		waitFor(b, 60*time.Second, "every event applied", func() bool {
			return count(b, gdb, "SELECT COUNT(*) FROM consumed_events") == 2*n+1
		})
		cons := float64(n) / time.Since(start).Seconds()
		b.ReportMetric(cons, "consumer_events/s")
		b.ReportMetric(raw, "raw_loop_events/s")
		b.ReportMetric(cons/raw, "ratio")
	}
}
