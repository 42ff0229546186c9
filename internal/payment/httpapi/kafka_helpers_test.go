package httpapi_test

import (
	"encoding/json"
	"testing"

	"github.com/IBM/sarama"

	"github.com/onceonly/onceonly/internal/payment/events"
	"github.com/onceonly/onceonly/internal/platform/kafka"
)

// published is one record read back from payment.events.
type published struct {
	Key     string
	Headers map[string]string
	Event   events.Event
	Raw     []byte
}

// readTopic returns every record on payment.events up to the end offsets
// taken when it is called: exactly what the broker holds, no waiting for
// "nothing more arrives".
func readTopic(t testing.TB, brokers []string) []published {
	t.Helper()
	cfg := kafka.ConsumerConfig("test-reader")
	client, err := sarama.NewClient(brokers, cfg)
	if err != nil {
		t.Fatalf("kafka client: %v", err)
	}
	defer client.Close()
	consumer, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		t.Fatalf("kafka consumer: %v", err)
	}
	defer consumer.Close()
	parts, err := client.Partitions(events.Topic)
	if err != nil {
		t.Fatalf("partitions: %v", err)
	}
	var out []published
	for _, p := range parts {
		end, err := client.GetOffset(events.Topic, p, sarama.OffsetNewest)
		if err != nil {
			t.Fatalf("end offset of partition %d: %v", p, err)
		}
		start, err := client.GetOffset(events.Topic, p, sarama.OffsetOldest)
		if err != nil {
			t.Fatalf("start offset of partition %d: %v", p, err)
		}
		if end <= start {
			continue
		}
		pc, err := consumer.ConsumePartition(events.Topic, p, start)
		if err != nil {
			t.Fatalf("consume partition %d: %v", p, err)
		}
		for m := range pc.Messages() {
			rec := published{Key: string(m.Key), Headers: map[string]string{}, Raw: m.Value}
			for _, h := range m.Headers {
				rec.Headers[string(h.Key)] = string(h.Value)
			}
			if err := json.Unmarshal(m.Value, &rec.Event); err != nil {
				t.Errorf("undecodable event %q: %v", m.Value, err)
			}
			out = append(out, rec)
			if m.Offset >= end-1 {
				break
			}
		}
		pc.Close()
	}
	return out
}
