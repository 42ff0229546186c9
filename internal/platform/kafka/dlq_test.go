package kafka_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/onceonly/onceonly/internal/platform/kafka"
	"github.com/onceonly/onceonly/internal/platform/testkit"
)

// readTopic reads every partition of topic from the start until want
// messages arrived, failing after timeout.
func readTopic(t *testing.T, brokers []string, topic string, want int, timeout time.Duration) []*sarama.ConsumerMessage {
	t.Helper()
	c, err := sarama.NewConsumer(brokers, kafka.ConsumerConfig("test-reader"))
	if err != nil {
		t.Fatalf("consumer: %v", err)
	}
	defer c.Close()
	out := make(chan *sarama.ConsumerMessage, want)
	for p := range int32(partitions) {
		pc, err := c.ConsumePartition(topic, p, sarama.OffsetOldest)
		if err != nil {
			t.Fatalf("consume %s/%d: %v", topic, p, err)
		}
		defer pc.AsyncClose()
		go func() {
			for m := range pc.Messages() {
				out <- m
			}
		}()
	}
	var got []*sarama.ConsumerMessage
	deadline := time.After(timeout)
	for len(got) < want {
		select {
		case m := <-out:
			got = append(got, m)
		case <-deadline:
			t.Fatalf("read %d of %d messages from %s within %v", len(got), want, topic, timeout)
		}
	}
	return got
}

func headers(m *sarama.ConsumerMessage) map[string][]string {
	h := map[string][]string{}
	for _, r := range m.Headers {
		h[string(r.Key)] = append(h[string(r.Key)], string(r.Value))
	}
	return h
}

func TestDeadLetter_CopiesKeyValueHeadersAndAddsReasonAndSource(t *testing.T) {
	t.Parallel()
	const src, dlq = "payment.events", "payment.events.dlq"
	brokers := testkit.Kafka(t, src, dlq)
	p, err := sarama.NewSyncProducer(brokers, kafka.ProducerConfig("test-dlq"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	// One keyed message with headers (one of them a stale "reason" that the
	// copy must replace) and one keyless message without headers.
	originals := []*sarama.ProducerMessage{
		{Topic: src, Key: sarama.StringEncoder("order-42"), Value: sarama.StringEncoder("{not json"),
			Headers: []sarama.RecordHeader{
				{Key: []byte("event_id"), Value: []byte("evt-1")},
				{Key: []byte("type"), Value: []byte("payment.succeeded")},
				{Key: []byte("reason"), Value: []byte("stale")},
			}},
		{Topic: src, Value: sarama.StringEncoder("keyless")},
	}
	if err := p.SendMessages(originals); err != nil {
		t.Fatal(err)
	}
	in := readTopic(t, brokers, src, 2, 10*time.Second)
	byValue := map[string]*sarama.ConsumerMessage{}
	for _, m := range in {
		byValue[string(m.Value)] = m
	}

	reg := prometheus.NewRegistry()
	d := kafka.NewDeadLetterer(p, dlq, reg)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := d.Send(ctx, byValue["{not json"], "undecodable value"); err != nil {
		t.Fatalf("Send: %v", err)
	}
	if err := kafka.DeadLetter(ctx, p, dlq, byValue["keyless"], "unknown order"); err != nil {
		t.Fatalf("DeadLetter: %v", err)
	}

	out := readTopic(t, brokers, dlq, 2, 10*time.Second)
	for _, cp := range out {
		orig := byValue[string(cp.Value)]
		if orig == nil {
			t.Fatalf("dead letter with unexpected value %q", cp.Value)
		}
		if string(cp.Key) != string(orig.Key) || (cp.Key == nil) != (orig.Key == nil) {
			t.Errorf("key %q, want %q", cp.Key, orig.Key)
		}
		h := headers(cp)
		want := map[string]string{
			"source_topic":     src,
			"source_partition": strconv.Itoa(int(orig.Partition)),
			"source_offset":    strconv.FormatInt(orig.Offset, 10),
			"reason":           "unknown order",
		}
		if orig.Key != nil {
			want["reason"] = "undecodable value"
			want["event_id"] = "evt-1"
			want["type"] = "payment.succeeded"
		}
		for k, v := range want {
			if got := h[k]; len(got) != 1 || got[0] != v {
				t.Errorf("%q: header %s = %q, want exactly [%q]", cp.Value, k, got, v)
			}
		}
		if len(h) != len(want) {
			t.Errorf("%q: headers %v, want only %v", cp.Value, h, want)
		}
	}
	if v := metricSum(t, reg, "onceonly_kafka_dead_letters_total", map[string]string{"topic": src}); v != 1 {
		t.Errorf("dead_letters_total{topic=%s} = %v, want 1 (only the DeadLetterer counts)", src, v)
	}
}
