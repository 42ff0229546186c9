package consumer_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/onceonly/onceonly/internal/order/consumer"
	"github.com/onceonly/onceonly/internal/order/store"
	"github.com/onceonly/onceonly/internal/payment/events"
	"github.com/onceonly/onceonly/internal/platform/kafka"
	"github.com/onceonly/onceonly/internal/platform/testkit"
)

// Every event is on the topic three times — twice back to back (so inside
// one batch) and once more later (a relay that re-published) — and each
// order is still PAID exactly once, with one consumed_events row per event.
func TestConsume_EveryEventDeliveredThreeTimesPaysEachOrderOnce(t *testing.T) {
	t.Parallel()
	gdb := testkit.DB(t, 10, migrations()...)
	brokers := testkit.Kafka(t, events.Topic, events.DLQTopic)
	const n = 300
	ids := seedOrders(t, gdb, n, time.Now())
	evs := succeeded(ids)
	p := newProducer(t, brokers)
	var msgs []*sarama.ProducerMessage
	for _, e := range evs {
		msgs = append(msgs, message(e), message(e))
	}
	for _, e := range evs {
		msgs = append(msgs, message(e))
	}
	p.send(msgs...)

	in := startConsumer(t, gdb, brokers)
	waitFor(t, 30*time.Second, "900 messages handled and committed", func() bool {
		return counter(t, in.reg, "onceonly_kafka_messages_handled_total") == 3*n
	})
	assertPaidOnce(t, gdb, ids)
	if rows := count(t, gdb, "SELECT COUNT(*) FROM consumed_events"); rows != n {
		t.Fatalf("consumed_events has %d rows, want one per event: %d", rows, n)
	}
	if odd := count(t, gdb, "SELECT COUNT(*) FROM consumed_events WHERE deliveries <> 3"); odd != 0 {
		t.Fatalf("%d events do not record 3 deliveries", odd)
	}
	if a, d := consumed(t, in.reg, consumer.OutcomeApplied), consumed(t, in.reg, consumer.OutcomeDuplicate); a != n || d != 2*n {
		t.Fatalf("counted %v applied and %v duplicates, want %d and %d", a, d, n, 2*n)
	}
}

// Poison messages go to the DLQ once each, with the reason and the source
// position, and the partition keeps flowing: the good events behind them
// (same key, so same partition) are applied.
func TestConsume_PoisonMessagesAreDeadLetteredOnceAndThePartitionKeepsFlowing(t *testing.T) {
	t.Parallel()
	gdb := testkit.DB(t, 10, migrations()...)
	brokers := testkit.Kafka(t, events.Topic, events.DLQTopic)
	ids := seedOrders(t, gdb, 3, time.Now())
	key := strconv.FormatInt(ids[0], 10) // every message on one partition
	jsonOf := func(mod func(*events.Event)) []byte {
		e := event(events.TypeSucceeded, ids[1])
		mod(&e)
		b, _ := json.Marshal(e)
		return b
	}
	poison := []struct {
		reason string
		value  []byte
	}{
		{consumer.ReasonInvalidJSON, []byte(`{"schema_version":1,"event_id":`)},
		{consumer.ReasonInvalidJSON, []byte(`{"schema_version":"1"}`)},
		{consumer.ReasonUnknownType, jsonOf(func(e *events.Event) { e.Type = "payment.charged" })},
		{consumer.ReasonInvalidOrderID, jsonOf(func(e *events.Event) { e.OrderID = "" })},
		{consumer.ReasonInvalidEventID, jsonOf(func(e *events.Event) { e.EventID = "" })},
		{consumer.ReasonSchemaVersion, jsonOf(func(e *events.Event) { e.SchemaVersion = 2 })},
		{consumer.ReasonInvalidAmount, jsonOf(func(e *events.Event) { e.AmountCents = 0 })},
		{consumer.ReasonUnknownOrder, jsonOf(func(e *events.Event) { e.OrderID = "999999999" })},
		{consumer.ReasonAmountMismatch, jsonOf(func(e *events.Event) { e.AmountCents = 699 })},
	}
	p := newProducer(t, brokers)
	var msgs []*sarama.ProducerMessage
	good := []events.Event{event(events.TypeSucceeded, ids[0]), event(events.TypeSucceeded, ids[1]), event(events.TypeFailed, ids[2])}
	for i, pm := range poison {
		msgs = append(msgs, raw(key, pm.value))
		if i == 2 {
			m := message(good[0])
			m.Key = sarama.StringEncoder(key)
			msgs = append(msgs, m)
		}
	}
	for _, e := range good[1:] {
		m := message(e)
		m.Key = sarama.StringEncoder(key)
		msgs = append(msgs, m)
	}
	p.send(msgs...)

	in := startConsumer(t, gdb, brokers)
	waitFor(t, 30*time.Second, "every message handled", func() bool {
		return counter(t, in.reg, "onceonly_kafka_messages_handled_total") == float64(len(msgs))
	})
	assertPaidOnce(t, gdb, ids[:2])
	if r := count(t, gdb, "SELECT COUNT(*) FROM consumed_events WHERE order_id = ? AND outcome = 'recorded'", ids[2]); r != 1 {
		t.Fatalf("the failed event after the poison: %d recorded rows, want 1", r)
	}
	dlq := dlqRecords(t, brokers)
	if len(dlq) != len(poison) {
		t.Fatalf("%d DLQ records, want one per poison message: %d", len(dlq), len(poison))
	}
	byOffset := map[string]*sarama.ConsumerMessage{}
	for _, d := range dlq {
		byOffset[header(d, kafka.HeaderSourcePartition)+"@"+header(d, kafka.HeaderSourceOffset)] = d
	}
	for _, m := range msgs {
		d := byOffset[strconv.Itoa(int(m.Partition))+"@"+strconv.FormatInt(m.Offset, 10)]
		if m.Headers != nil { // a good event
			if d != nil {
				t.Errorf("good event at offset %d was dead-lettered: %s", m.Offset, header(d, kafka.HeaderReason))
			}
			continue
		}
		v, _ := m.Value.Encode()
		var want string
		for _, pm := range poison {
			if string(pm.value) == string(v) {
				want = pm.reason
			}
		}
		switch {
		case d == nil:
			t.Errorf("poison at offset %d (%s) not dead-lettered", m.Offset, want)
		case !strings.HasPrefix(header(d, kafka.HeaderReason), want+": "):
			t.Errorf("poison at offset %d: reason %q, want %s: …", m.Offset, header(d, kafka.HeaderReason), want)
		case string(d.Value) != string(v) || string(d.Key) != key:
			t.Errorf("DLQ copy of offset %d differs from the original", m.Offset)
		}
	}
	if n := consumed(t, in.reg, consumer.OutcomeDeadLettered); n != float64(len(poison)) {
		t.Errorf("dead_lettered counted %v, want %d", n, len(poison))
	}
	if n := count(t, gdb, "SELECT COUNT(*) FROM consumed_events"); n != int64(len(good)) {
		t.Errorf("consumed_events has %d rows, want only the %d good events", n, len(good))
	}
}

// After a rebalance the old owner of a partition may still be inside its
// transaction when the new owner gets the same batch. Both run it at once:
// the dedup insert of one waits for the other's and then sees its row, so
// every event is applied once and both return nil (or a retryable error,
// e.g. a deadlock victim, which the Runner retries).
func TestConsume_SameBatchOnTwoMembersAtOnceAppliesEachEventOnce(t *testing.T) {
	t.Parallel()
	gdb := testkit.DB(t, 20, migrations()...)
	ids := seedOrders(t, gdb, 200, time.Now())
	batch := consumerMessages(succeeded(ids))
	st, _ := store.New(gdb, nil)
	c, err := consumer.New(consumer.Config{DB: gdb, Store: st, DeadLetters: noDLQ{t}, Log: warnLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	const members = 4
	var wg sync.WaitGroup
	for range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// In chunks of 50, as a member's batches would come.
			for start := 0; start < len(batch); start += 50 {
				handleUntilNil(t, c, batch[start:start+50])
			}
		}()
	}
	wg.Wait()
	assertPaidOnce(t, gdb, ids)
	if n := count(t, gdb, "SELECT COUNT(*) FROM consumed_events WHERE deliveries <> ?", members); n != 0 {
		t.Fatalf("%d events without %d recorded deliveries", n, members)
	}
}

// A payment.succeeded under a new event_id for an order already PAID by that
// payment (a re-driven event) is recorded as a duplicate, without a second
// transition; for an order CANCELLED first it is recorded as late.
func TestConsume_RedrivenAndLateSucceededEventsAreRecordedWithoutATransition(t *testing.T) {
	t.Parallel()
	gdb := testkit.DB(t, 10, migrations()...)
	ids := seedOrders(t, gdb, 2, time.Now())
	st, _ := store.New(gdb, nil)
	c, err := consumer.New(consumer.Config{DB: gdb, Store: st, DeadLetters: noDLQ{t}})
	if err != nil {
		t.Fatal(err)
	}
	if err := gdb.Exec("UPDATE orders SET status = 'CANCELLED', version = version + 1 WHERE id = ?", ids[1]).Error; err != nil {
		t.Fatal(err)
	}
	first := event(events.TypeSucceeded, ids[0])
	redriven := first
	redriven.EventID = "ev-redriven"
	late := event(events.TypeSucceeded, ids[1])
	handleUntilNil(t, c, consumerMessages([]events.Event{first, redriven, late}))
	rows := orderRows(t, gdb, ids)
	if rows[ids[0]].Status != "PAID" || rows[ids[0]].Version != 2 || rows[ids[1]].Status != "CANCELLED" || rows[ids[1]].Version != 2 {
		t.Fatalf("orders %+v", rows)
	}
	for id, want := range map[string]string{first.EventID: consumer.OutcomeApplied, redriven.EventID: consumer.OutcomeDuplicate, late.EventID: consumer.OutcomeLate} {
		var got string
		if err := gdb.Raw("SELECT outcome FROM consumed_events WHERE event_id = ?", id).Scan(&got).Error; err != nil || got != want {
			t.Errorf("event %s: outcome %q (%v), want %q", id, got, err, want)
		}
	}
}

// consumerMessages turns events into the messages of one partition.
func consumerMessages(es []events.Event) []*sarama.ConsumerMessage {
	out := make([]*sarama.ConsumerMessage, len(es))
	for i, e := range es {
		b, _ := json.Marshal(e)
		out[i] = &sarama.ConsumerMessage{Topic: events.Topic, Partition: 0, Offset: int64(i), Key: []byte(e.OrderID), Value: b}
	}
	return out
}

// handleUntilNil calls Handle as the Runner would: again after an error.
func handleUntilNil(t testing.TB, c *consumer.Consumer, batch []*sarama.ConsumerMessage) {
	t.Helper()
	for attempt := 0; ; attempt++ {
		err := c.Handle(context.Background(), batch)
		if err == nil {
			return
		}
		if attempt == 50 {
			t.Errorf("Handle still failing after %d attempts: %v", attempt, err)
			return
		}
		time.Sleep(time.Duration(attempt+1) * 5 * time.Millisecond)
	}
}

// noDLQ fails the test if anything is dead-lettered.
type noDLQ struct{ t testing.TB }

func (d noDLQ) Send(_ context.Context, m *sarama.ConsumerMessage, reason string) error {
	d.t.Errorf("unexpected dead letter of offset %d: %s", m.Offset, reason)
	return errors.New("no DLQ here")
}
