package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/onceonly/onceonly/internal/platform/kafka"
	"github.com/onceonly/onceonly/internal/platform/testkit"
)

// partitions is what testkit.Kafka creates per topic.
const partitions = 3

// produce writes n messages (key key-<i%keys>, value v-<i>) with the
// idempotent producer config and returns them with partition and offset
// filled in by the broker. partition < 0 hashes the key; otherwise every
// message goes to that partition.
func produce(t *testing.T, brokers []string, topic string, n, keys int, partition int32) []*sarama.ProducerMessage {
	t.Helper()
	cfg := kafka.ProducerConfig("test-producer")
	if partition >= 0 {
		cfg.Producer.Partitioner = sarama.NewManualPartitioner
	}
	p, err := sarama.NewSyncProducer(brokers, cfg)
	if err != nil {
		t.Fatalf("producer: %v", err)
	}
	defer p.Close()
	msgs := make([]*sarama.ProducerMessage, n)
	for i := range msgs {
		msgs[i] = &sarama.ProducerMessage{
			Topic:     topic,
			Partition: partition,
			Key:       sarama.StringEncoder(fmt.Sprintf("key-%d", i%keys)),
			Value:     sarama.StringEncoder(fmt.Sprintf("v-%d", i)),
		}
	}
	if err := p.SendMessages(msgs); err != nil {
		t.Fatalf("produce %d messages: %v", n, err)
	}
	return msgs
}

// admin returns a cluster admin closed at the end of the test.
func admin(t *testing.T, brokers []string) sarama.ClusterAdmin {
	t.Helper()
	a, err := sarama.NewClusterAdmin(brokers, kafka.ConsumerConfig("test-admin"))
	if err != nil {
		t.Fatalf("admin: %v", err)
	}
	t.Cleanup(func() { _ = a.Close() })
	return a
}

// committed returns the group's committed offset per partition (-1: none).
func committed(t *testing.T, a sarama.ClusterAdmin, group, topic string) map[int32]int64 {
	t.Helper()
	ps := []int32{0, 1, 2}
	out := map[int32]int64{0: -1, 1: -1, 2: -1}
	resp, err := a.ListConsumerGroupOffsets(group, map[string][]int32{topic: ps})
	// kfake answers GROUP_ID_NOT_FOUND before the group's first join, where
	// Kafka answers -1 offsets: same meaning.
	if errors.Is(err, sarama.ErrGroupIDNotFound) {
		return out
	}
	if err != nil {
		t.Errorf("list group offsets: %v", err)
		return nil
	}
	for _, p := range ps {
		if b := resp.GetBlock(topic, p); b != nil {
			out[p] = b.Offset
		}
	}
	return out
}

// endOffsets returns the next offset to be written per partition.
func endOffsets(t *testing.T, brokers []string, topic string) map[int32]int64 {
	t.Helper()
	c, err := sarama.NewClient(brokers, kafka.ConsumerConfig("test-offsets"))
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	defer c.Close()
	out := make(map[int32]int64, partitions)
	for p := range int32(partitions) {
		o, err := c.GetOffset(topic, p, sarama.OffsetNewest)
		if err != nil {
			t.Fatalf("end offset %s/%d: %v", topic, p, err)
		}
		out[p] = o
	}
	return out
}

// startRunner runs a Runner in the background; the returned stop cancels it
// and waits for Run to return (also at test end, before the cluster closes).
func startRunner(t *testing.T, cfg kafka.RunnerConfig) (stop func()) {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testkit.Logger(t)
	}
	r, err := kafka.NewRunner(cfg)
	if err != nil {
		t.Fatalf("NewRunner: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(20 * time.Second):
				t.Errorf("Run did not return within 20 s of cancel")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// eventually polls cond every 20 ms until it holds, failing after timeout.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// seen records what a handler was given, safe for concurrent handlers.
type seen struct {
	mu   sync.Mutex
	msgs []*sarama.ConsumerMessage
}

func (s *seen) add(msgs []*sarama.ConsumerMessage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.msgs = append(s.msgs, msgs...)
}

func (s *seen) snapshot() []*sarama.ConsumerMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*sarama.ConsumerMessage(nil), s.msgs...)
}

func (s *seen) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.msgs)
}
