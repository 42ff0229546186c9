package app

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/onceonly/onceonly/internal/order"
	"github.com/onceonly/onceonly/internal/order/store"
	"github.com/onceonly/onceonly/internal/payment/events"
	"github.com/onceonly/onceonly/internal/platform/kafka"
	"github.com/onceonly/onceonly/internal/platform/testkit"
)

// The background work as Run starts it: a payment.succeeded on the topic
// pays its order, a poison message reaches the DLQ through the lazily made
// producer, the closer cancels an expired order, and stop returns promptly.
func TestStartBackground_ConsumesClosesAndStops(t *testing.T) {
	t.Parallel()
	gdb := testkit.DB(t, 10, Migrations()...)
	rdb, prefix := testkit.Redis(t)
	brokers := testkit.Kafka(t, events.Topic, events.DLQTopic)
	cfg := validConfig(t)
	cfg.KafkaBrokers, cfg.LockRedisAddrs = brokers, []string{rdb.Options().Addr}
	cfg.PaymentTimeout, cfg.TimeoutInterval = time.Second, 200*time.Millisecond

	st, err := store.New(gdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	mk := func(token string) order.Order {
		o := order.Order{UserID: "alice", Status: order.PendingPayment, AmountCents: 700, Currency: "CNY",
			Items: []order.Item{{SKU: "a", Quantity: 1, PriceCents: 700}}, SubmitToken: token, BodyHash: "h"}
		if err := st.Create(context.Background(), &o); err != nil {
			t.Fatal(err)
		}
		return o
	}
	paid := mk("TOKENPAID0000001")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reg := prometheus.NewRegistry()
	stop, err := StartBackground(ctx, Background{Config: cfg, DB: gdb, Registry: reg, Log: testkit.Logger(t), KeyPrefix: prefix})
	if err != nil {
		t.Fatal(err)
	}

	p, err := sarama.NewSyncProducer(brokers, kafka.ProducerConfig("test"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	e := events.Event{SchemaVersion: 1, EventID: "ev-1", Type: events.TypeSucceeded, PaymentID: "pay-1",
		OrderID: strconv.FormatInt(paid.ID, 10), AmountCents: 700, Currency: "CNY"}
	v, _ := json.Marshal(e)
	for _, m := range []*sarama.ProducerMessage{
		{Topic: events.Topic, Key: sarama.StringEncoder(e.OrderID), Value: sarama.StringEncoder("not json")},
		{Topic: events.Topic, Key: sarama.StringEncoder(e.OrderID), Value: sarama.ByteEncoder(v)},
	} {
		if _, _, err := p.SendMessage(m); err != nil {
			t.Fatal(err)
		}
	}
	// Created now, expired a second later: the closer cancels it.
	expiring := mk("TOKENEXPIRE00001")

	deadline := time.Now().Add(30 * time.Second)
	for {
		a, _ := st.Get(context.Background(), "", paid.ID)
		b, _ := st.Get(context.Background(), "", expiring.ID)
		if a.Status == order.Paid && b.Status == order.Cancelled {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s: paid order %s, expiring order %s", a.Status, b.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}
	client, err := sarama.NewClient(brokers, kafka.ConsumerConfig("test"))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	var dlq int64
	for _, part := range []int32{0, 1, 2} {
		off, err := client.GetOffset(events.DLQTopic, part, sarama.OffsetNewest)
		if err != nil {
			t.Fatal(err)
		}
		dlq += off
	}
	if dlq != 1 {
		t.Fatalf("%d DLQ records, want 1", dlq)
	}

	cancel()
	start := time.Now()
	if err := stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if took := time.Since(start); took > workersStopTimeout {
		t.Fatalf("stop took %v", took)
	}
}
