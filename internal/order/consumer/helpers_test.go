package consumer_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"

	"github.com/onceonly/onceonly/internal/order/consumer"
	"github.com/onceonly/onceonly/internal/order/store"
	"github.com/onceonly/onceonly/internal/payment/events"
	"github.com/onceonly/onceonly/internal/platform/db"
	"github.com/onceonly/onceonly/internal/platform/kafka"
	"github.com/onceonly/onceonly/internal/platform/lock"
	"github.com/onceonly/onceonly/internal/platform/testkit"
)

func TestMain(m *testing.M) {
	// The kill test re-executes this binary as the consumer (kill_test.go).
	if os.Getenv(childEnv) != "" {
		os.Exit(runChild())
	}
	os.Exit(m.Run())
}

func migrations() []db.Migration {
	return append(append(store.Migrations(), consumer.Migrations()...), lock.Migrations()...)
}

// warnLogger sends warnings and errors into the test log.
func warnLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// seedOrders inserts n PENDING_PAYMENT orders of 700 CNY created at
// createdAt, a few statements for all of them, and returns their ids.
func seedOrders(t testing.TB, gdb *gorm.DB, n int, createdAt time.Time) []int64 {
	t.Helper()
	tag := testkit.RandomName("")
	const chunk = 500
	for start := 0; start < n; start += chunk {
		var sb strings.Builder
		var args []any
		sb.WriteString("INSERT INTO orders (user_id, status, amount_cents, currency, items, submit_token, body_hash, version, created_at, updated_at) VALUES ")
		for i := start; i < min(start+chunk, n); i++ {
			if i > start {
				sb.WriteString(",")
			}
			sb.WriteString("(?, 'PENDING_PAYMENT', 700, 'CNY', ?, ?, ?, 1, ?, ?)")
			args = append(args, "user-"+strconv.Itoa(i%7), `[{"sku":"apple","quantity":2,"price_cents":350}]`,
				fmt.Sprintf("%s%08d", tag, i), strings.Repeat("a", 64), createdAt.UTC(), createdAt.UTC())
		}
		if err := gdb.Exec(sb.String(), args...).Error; err != nil {
			t.Fatalf("seed orders: %v", err)
		}
	}
	var ids []int64
	if err := gdb.Raw("SELECT id FROM orders WHERE submit_token LIKE ? ORDER BY id", tag+"%").Scan(&ids).Error; err != nil || len(ids) != n {
		t.Fatalf("seeded %d orders (%v), want %d", len(ids), err, n)
	}
	return ids
}

// event is a valid payment event for order id.
func event(typ string, id int64) events.Event {
	return events.Event{SchemaVersion: 1, EventID: testkit.RandomName("ev-"), Type: typ,
		PaymentID: "pay-" + strconv.FormatInt(id, 10), OrderID: strconv.FormatInt(id, 10),
		AmountCents: 700, Currency: "CNY", OccurredAt: time.Now().UTC()}
}

func succeeded(ids []int64) []events.Event {
	out := make([]events.Event, len(ids))
	for i, id := range ids {
		out[i] = event(events.TypeSucceeded, id)
	}
	return out
}

// message is e as the outbox relay publishes it: key order_id, headers
// event_id, type and request_id.
func message(e events.Event) *sarama.ProducerMessage {
	b, _ := json.Marshal(e)
	return raw(e.OrderID, b, sarama.RecordHeader{Key: []byte("event_id"), Value: []byte(e.EventID)},
		sarama.RecordHeader{Key: []byte("type"), Value: []byte(e.Type)},
		sarama.RecordHeader{Key: []byte("request_id"), Value: []byte("req-test")})
}

func raw(key string, value []byte, headers ...sarama.RecordHeader) *sarama.ProducerMessage {
	return &sarama.ProducerMessage{Topic: events.Topic, Key: sarama.StringEncoder(key), Value: sarama.ByteEncoder(value), Headers: headers}
}

// producer is a test producer with the production config (idempotent,
// acks=all, key-hash partitioning).
type producer struct {
	t testing.TB
	p sarama.SyncProducer
}

func newProducer(t testing.TB, brokers []string) *producer {
	t.Helper()
	p, err := sarama.NewSyncProducer(brokers, kafka.ProducerConfig("test-producer"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return &producer{t: t, p: p}
}

// send publishes msgs in order and fills in their partitions and offsets.
func (p *producer) send(msgs ...*sarama.ProducerMessage) {
	p.t.Helper()
	for start := 0; start < len(msgs); start += 500 {
		if err := p.p.SendMessages(msgs[start:min(start+500, len(msgs))]); err != nil {
			p.t.Fatalf("produce: %v", err)
		}
	}
}

func (p *producer) events(es ...events.Event) []*sarama.ProducerMessage {
	p.t.Helper()
	msgs := make([]*sarama.ProducerMessage, len(es))
	for i, e := range es {
		msgs[i] = message(e)
	}
	p.send(msgs...)
	return msgs
}

// instance is one consumer process's worth: a Consumer and its Runner.
type instance struct {
	c      *consumer.Consumer
	reg    *prometheus.Registry
	cancel context.CancelFunc
	done   chan struct{}
}

// startConsumer runs a consumer on gdb in the order-service group, with
// the production configuration, until the test ends (or stop).
func startConsumer(t testing.TB, gdb *gorm.DB, brokers []string) *instance {
	t.Helper()
	reg := prometheus.NewRegistry()
	st, err := store.New(gdb, reg)
	if err != nil {
		t.Fatal(err)
	}
	dlqProducer, err := sarama.NewSyncProducer(brokers, kafka.ProducerConfig("test-dlq"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := consumer.New(consumer.Config{DB: gdb, Store: st, Log: warnLogger(t), Registerer: reg,
		DeadLetters: kafka.NewDeadLetterer(dlqProducer, events.DLQTopic, reg)})
	if err != nil {
		t.Fatal(err)
	}
	r, err := kafka.NewRunner(c.RunnerConfig(brokers, nil, warnLogger(t), reg))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	in := &instance{c: c, reg: reg, cancel: cancel, done: make(chan struct{})}
	go func() { defer close(in.done); _ = r.Run(ctx) }()
	t.Cleanup(func() { in.stop(); _ = dlqProducer.Close() })
	return in
}

// stop leaves the group and waits for the runner.
func (in *instance) stop() {
	in.cancel()
	<-in.done
}

// counter sums a counter family's samples whose labels include want.
func counter(t testing.TB, reg *prometheus.Registry, name string, want ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metric:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for i := 0; i+1 < len(want); i += 2 {
				if have[want[i]] != want[i+1] {
					continue metric
				}
			}
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

func consumed(t testing.TB, reg *prometheus.Registry, outcome string) float64 {
	return counter(t, reg, "onceonly_order_events_consumed_total", "outcome", outcome)
}

// waitFor polls cond every 20 ms until it holds or timeout passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func count(t testing.TB, gdb *gorm.DB, query string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := gdb.Raw(query, args...).Scan(&n).Error; err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// orderRow is what the tests check of an order.
type orderRow struct {
	ID        int64
	Status    string
	Version   int64
	PaymentID *string
}

func orderRows(t testing.TB, gdb *gorm.DB, ids []int64) map[int64]orderRow {
	t.Helper()
	out := map[int64]orderRow{}
	for start := 0; start < len(ids); start += 500 {
		var rows []orderRow
		if err := gdb.Raw("SELECT id, status, version, payment_id FROM orders WHERE id IN ?", ids[start:min(start+500, len(ids))]).Scan(&rows).Error; err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			out[r.ID] = r
		}
	}
	return out
}

// assertPaidOnce checks every order is PAID by its own payment with exactly
// one transition (version 1 → 2), and that consumed_events has exactly one
// applied row per order.
func assertPaidOnce(t testing.TB, gdb *gorm.DB, ids []int64) {
	t.Helper()
	rows := orderRows(t, gdb, ids)
	bad := 0
	for _, id := range ids {
		r := rows[id]
		if r.Status != "PAID" || r.Version != 2 || r.PaymentID == nil || *r.PaymentID != "pay-"+strconv.FormatInt(id, 10) {
			if bad++; bad <= 5 {
				t.Errorf("order %d: %+v, want PAID at version 2 by pay-%d", id, r, id)
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d orders not PAID exactly once", bad, len(ids))
	}
	var applied int64
	if err := gdb.Raw("SELECT COUNT(DISTINCT order_id) FROM consumed_events WHERE outcome = 'applied' AND order_id IN ?", ids).Scan(&applied).Error; err != nil {
		t.Fatal(err)
	}
	perOrder := count(t, gdb, "SELECT COUNT(*) FROM consumed_events WHERE outcome = 'applied' AND order_id IN ?", ids)
	if applied != int64(len(ids)) || perOrder != int64(len(ids)) {
		t.Fatalf("consumed_events: %d applied rows over %d orders, want %d and %d", perOrder, applied, len(ids), len(ids))
	}
}

// dlqRecords reads every record on the DLQ topic.
func dlqRecords(t testing.TB, brokers []string) []*sarama.ConsumerMessage {
	t.Helper()
	client, err := sarama.NewClient(brokers, kafka.ConsumerConfig("test-dlq-reader"))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	parts, err := client.Partitions(events.DLQTopic)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	var out []*sarama.ConsumerMessage
	for _, p := range parts {
		end, err := client.GetOffset(events.DLQTopic, p, sarama.OffsetNewest)
		if err != nil {
			t.Fatal(err)
		}
		if end == 0 {
			continue
		}
		pc, err := cons.ConsumePartition(events.DLQTopic, p, sarama.OffsetOldest)
		if err != nil {
			t.Fatal(err)
		}
		for m := range pc.Messages() {
			out = append(out, m)
			if m.Offset == end-1 {
				break
			}
		}
		pc.Close()
	}
	return out
}

func header(m *sarama.ConsumerMessage, key string) string {
	for _, h := range m.Headers {
		if string(h.Key) == key {
			return string(h.Value)
		}
	}
	return ""
}
