package consumer_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/go-sql-driver/mysql"
	"gorm.io/gorm"

	"github.com/onceonly/onceonly/internal/order/consumer"
	"github.com/onceonly/onceonly/internal/payment/events"
	"github.com/onceonly/onceonly/internal/platform/db"
	"github.com/onceonly/onceonly/internal/platform/kafka"
	"github.com/onceonly/onceonly/internal/platform/testkit"
)

// A second member joins while events stream in, takes partitions, and leaves
// again; the first takes them back. Every event is applied once: the
// batches interrupted by the two rebalances are redelivered and their
// applied events skipped.
func TestConsume_SecondMemberJoiningAndLeavingLosesAndDoublesNothing(t *testing.T) {
	t.Parallel()
	gdb := testkit.DB(t, 20, migrations()...)
	brokers := testkit.Kafka(t, events.Topic, events.DLQTopic)
	const n = 1200
	ids := seedOrders(t, gdb, n, time.Now())
	evs := succeeded(ids)
	p := newProducer(t, brokers)
	p.events(evs[:300]...)

	a := startConsumer(t, gdb, brokers)
	waitFor(t, 30*time.Second, "the first member to apply events", func() bool {
		return consumed(t, a.reg, consumer.OutcomeApplied) > 0
	})
	// The rest streams in, 10 every 25 ms, while the second member comes and goes.
	streamed := make(chan error, 1)
	go func() {
		for start := 300; start < n; start += 10 {
			msgs := make([]*sarama.ProducerMessage, 0, 10)
			for _, e := range evs[start : start+10] {
				msgs = append(msgs, message(e))
			}
			if err := p.p.SendMessages(msgs); err != nil {
				streamed <- err
				return
			}
			time.Sleep(25 * time.Millisecond)
		}
		streamed <- nil
	}()
	b := startConsumer(t, gdb, brokers)
	waitFor(t, 30*time.Second, "the second member to get partitions and apply events", func() bool {
		return consumed(t, b.reg, consumer.OutcomeApplied) >= 20
	})
	b.stop() // leaves the group: its partitions go back to the first member
	if err := <-streamed; err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "every event consumed", func() bool {
		return count(t, gdb, "SELECT COUNT(*) FROM consumed_events") >= n
	})
	assertPaidOnce(t, gdb, ids)
	aApplied, bApplied := consumed(t, a.reg, consumer.OutcomeApplied), consumed(t, b.reg, consumer.OutcomeApplied)
	if aApplied+bApplied != n {
		t.Fatalf("applied %v + %v, want %d in all", aApplied, bApplied, n)
	}
	t.Logf("applied by the first member %v, by the second %v; duplicates skipped %v", aApplied, bApplied,
		consumed(t, a.reg, consumer.OutcomeDuplicate)+consumed(t, b.reg, consumer.OutcomeDuplicate))
}

// The database is cut off for 6 s while events keep arriving: the consumer
// retries its batch in place, no committed offset ever passes an event that
// is not in consumed_events, and once the database is back everything is
// applied exactly once.
func TestConsume_DatabaseDownNeverCommitsPastAnUnappliedEventAndCatchesUp(t *testing.T) {
	t.Parallel()
	if os.Getenv("TEST_MYSQL_DSN") == "" {
		testkit.NeedReal(t, "the outage is a proxy cut between the consumer and MariaDB (TEST_MYSQL_DSN)")
	}
	dsn := testkit.DSN(t)
	direct, err := db.Open(context.Background(), dsn, db.Options{MaxOpenConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close(direct) })
	if err := db.Migrate(context.Background(), direct, nil, migrations()...); err != nil {
		t.Fatal(err)
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	px := testkit.NewProxy(t, cfg.Addr)
	cfg.Addr = px.Addr
	viaProxy, err := db.Open(context.Background(), cfg.FormatDSN(), db.Options{MaxOpenConns: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close(viaProxy) })

	brokers := testkit.Kafka(t, events.Topic, events.DLQTopic)
	const n = 600
	ids := seedOrders(t, direct, n, time.Now())
	evs := succeeded(ids)
	p := newProducer(t, brokers)
	msgs := p.events(evs[:200]...)
	in := startConsumer(t, viaProxy, brokers)
	waitFor(t, 30*time.Second, "the first 200 events", func() bool {
		return count(t, direct, "SELECT COUNT(*) FROM consumed_events") == 200
	})

	px.Cut()
	msgs = append(msgs, p.events(evs[200:]...)...)
	eventAt := map[string]string{}
	for i, m := range msgs {
		eventAt[fmt.Sprintf("%d@%d", m.Partition, m.Offset)] = evs[i].EventID
	}
	admin, err := sarama.NewClusterAdmin(brokers, kafka.ConsumerConfig("test-admin"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	for end := time.Now().Add(6 * time.Second); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		assertCommittedAreApplied(t, admin, direct, eventAt)
	}
	if applied := count(t, direct, "SELECT COUNT(*) FROM consumed_events"); applied != 200 {
		t.Fatalf("%d events consumed while the database was unreachable", applied)
	}
	px.Restore()

	waitFor(t, 30*time.Second, "every event after the outage", func() bool {
		return count(t, direct, "SELECT COUNT(*) FROM consumed_events") >= n
	})
	assertPaidOnce(t, direct, ids)
	assertCommittedAreApplied(t, admin, direct, eventAt)
	if r := counter(t, in.reg, "onceonly_kafka_handler_retries_total"); r == 0 {
		t.Fatal("no retries counted during the outage")
	}
}

// assertCommittedAreApplied checks that below every offset the group has
// committed, each event is in consumed_events.
func assertCommittedAreApplied(t *testing.T, admin sarama.ClusterAdmin, gdb *gorm.DB, eventAt map[string]string) {
	t.Helper()
	res, err := admin.ListConsumerGroupOffsets(consumer.Group, map[string][]int32{events.Topic: {0, 1, 2}})
	if err != nil {
		t.Fatal(err)
	}
	for part, block := range res.Blocks[events.Topic] {
		var missing []string
		for off := int64(0); off < block.Offset; off++ {
			id, ok := eventAt[fmt.Sprintf("%d@%d", part, off)]
			if !ok {
				t.Fatalf("partition %d: committed offset %d is past the end of what was produced", part, block.Offset)
			}
			missing = append(missing, id)
		}
		if len(missing) == 0 {
			continue
		}
		if n := count(t, gdb, "SELECT COUNT(*) FROM consumed_events WHERE event_id IN ?", missing); n != int64(len(missing)) {
			t.Fatalf("partition %d: offset %d committed but only %d of the %d events below it are applied", part, block.Offset, n, len(missing))
		}
	}
}
