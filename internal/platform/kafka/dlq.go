package kafka

import (
	"context"
	"fmt"
	"strconv"

	"github.com/IBM/sarama"
	"github.com/prometheus/client_golang/prometheus"
)

// Header names DeadLetter adds to the copy. Together they point back at the
// original, so an operator can replay it after fixing the cause.
const (
	HeaderReason          = "reason"
	HeaderSourceTopic     = "source_topic"
	HeaderSourcePartition = "source_partition"
	HeaderSourceOffset    = "source_offset"
)

// DeadLetter writes a copy of msg (key, value, headers) to topic with four
// more headers: reason, source_topic, source_partition and source_offset
// (decimal). A header of the original with one of those names is replaced,
// so the copy never carries two reasons.
//
// It returns only after the broker acknowledged the copy (the producer's
// acks and retries apply), or the producer's error. The send itself is not
// interrupted by ctx (sarama's producer takes none): ctx is checked before.
// A handler that gets an error must fail its batch so the runner retries it;
// a retry after a lost ack may write a second copy, so the dead-letter topic
// is at-least-once like any other.
//
// The domain handler decides what is poison; the Runner never dead-letters
// by itself.
func DeadLetter(ctx context.Context, producer sarama.SyncProducer, topic string, msg *sarama.ConsumerMessage, reason string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("kafka: dead letter %s/%d@%d: %w", msg.Topic, msg.Partition, msg.Offset, err)
	}
	added := []sarama.RecordHeader{
		{Key: []byte(HeaderReason), Value: []byte(reason)},
		{Key: []byte(HeaderSourceTopic), Value: []byte(msg.Topic)},
		{Key: []byte(HeaderSourcePartition), Value: []byte(strconv.FormatInt(int64(msg.Partition), 10))},
		{Key: []byte(HeaderSourceOffset), Value: []byte(strconv.FormatInt(msg.Offset, 10))},
	}
	headers := make([]sarama.RecordHeader, 0, len(msg.Headers)+len(added))
	for _, h := range msg.Headers {
		if h == nil || isAddedHeader(string(h.Key)) {
			continue
		}
		headers = append(headers, sarama.RecordHeader{Key: h.Key, Value: h.Value})
	}
	out := &sarama.ProducerMessage{
		Topic:   topic,
		Headers: append(headers, added...),
	}
	// A nil Encoder, not an empty one: a message without a key stays keyless.
	if msg.Key != nil {
		out.Key = sarama.ByteEncoder(msg.Key)
	}
	if msg.Value != nil {
		out.Value = sarama.ByteEncoder(msg.Value)
	}
	if _, _, err := producer.SendMessage(out); err != nil {
		return fmt.Errorf("kafka: dead letter %s/%d@%d to %s: %w", msg.Topic, msg.Partition, msg.Offset, topic, err)
	}
	return nil
}

func isAddedHeader(k string) bool {
	return k == HeaderReason || k == HeaderSourceTopic || k == HeaderSourcePartition || k == HeaderSourceOffset
}

// DeadLetterer is DeadLetter bound to a producer and a topic, counting what
// it writes in onceonly_kafka_dead_letters_total{topic=<source topic>}.
// It is safe for concurrent use.
type DeadLetterer struct {
	producer sarama.SyncProducer
	topic    string
	count    *prometheus.CounterVec
}

// NewDeadLetterer returns a DeadLetterer writing to topic. reg may be nil.
func NewDeadLetterer(producer sarama.SyncProducer, topic string, reg prometheus.Registerer) *DeadLetterer {
	return &DeadLetterer{producer: producer, topic: topic, count: newDeadLetterMetric(reg)}
}

// Send writes a copy of msg with reason; see DeadLetter for the contract.
func (d *DeadLetterer) Send(ctx context.Context, msg *sarama.ConsumerMessage, reason string) error {
	if err := DeadLetter(ctx, d.producer, d.topic, msg, reason); err != nil {
		return err
	}
	d.count.WithLabelValues(msg.Topic).Inc()
	return nil
}
