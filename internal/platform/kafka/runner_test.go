package kafka_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/onceonly/onceonly/internal/platform/kafka"
	"github.com/onceonly/onceonly/internal/platform/testkit"
)

// checkBatch fails the test unless msgs are consecutive messages of one
// partition, in offset order, at most maxBatch of them.
func checkBatch(t *testing.T, msgs []*sarama.ConsumerMessage, maxBatch int) {
	if len(msgs) == 0 || len(msgs) > maxBatch {
		t.Errorf("batch of %d messages, want 1..%d", len(msgs), maxBatch)
		return
	}
	for i, m := range msgs {
		if m.Partition != msgs[0].Partition || m.Offset != msgs[0].Offset+int64(i) {
			t.Errorf("batch not consecutive in one partition: [0]=%d@%d, [%d]=%d@%d",
				msgs[0].Partition, msgs[0].Offset, i, m.Partition, m.Offset)
			return
		}
	}
}

func TestRunner_IdempotentProducerThousandMessagesAllDeliveredInPartitionOrderCommittedAfterHandler(t *testing.T) {
	t.Parallel()
	const topic, group, n, maxBatch = "payment.events", "order-consumer", 1000, 100
	brokers := testkit.Kafka(t, topic)
	produced := produce(t, brokers, topic, n, 50, -1)
	end := endOffsets(t, brokers, topic)
	a := admin(t, brokers)
	reg := prometheus.NewRegistry()

	var got seen
	handler := func(_ context.Context, msgs []*sarama.ConsumerMessage) error {
		checkBatch(t, msgs, maxBatch)
		// While the handler runs, its batch must not be committed yet.
		if c := committed(t, a, group, topic)[msgs[0].Partition]; c > msgs[0].Offset {
			t.Errorf("partition %d committed at %d while the handler still holds offset %d",
				msgs[0].Partition, c, msgs[0].Offset)
		}
		got.add(msgs)
		return nil
	}
	stop := startRunner(t, kafka.RunnerConfig{Brokers: brokers, Group: group, Topics: []string{topic},
		Handler: handler, MaxBatch: maxBatch, Registerer: reg})

	eventually(t, 20*time.Second, "all messages handled", func() bool { return got.len() >= n })
	eventually(t, 10*time.Second, "committed offsets to reach the end offsets", func() bool {
		c := committed(t, a, group, topic)
		return c[0] == end[0] && c[1] == end[1] && c[2] == end[2]
	})
	eventually(t, 5*time.Second, "lag gauges at 0", func() bool {
		return metricSum(t, reg, "onceonly_kafka_consumer_lag", nil) == 0 &&
			metricCount(t, reg, "onceonly_kafka_consumer_lag") == partitions
	})
	stop()

	// Every produced message arrives exactly once (no redelivery without a
	// restart), at the partition and offset the producer was told, and each
	// partition is handled in offset order.
	want := make(map[[2]int64]*sarama.ProducerMessage, n)
	for _, m := range produced {
		want[[2]int64{int64(m.Partition), m.Offset}] = m
	}
	next := map[int32]int64{}
	for _, m := range got.snapshot() {
		if m.Offset != next[m.Partition] {
			t.Fatalf("partition %d: got offset %d, want %d (order or completeness broken)", m.Partition, m.Offset, next[m.Partition])
		}
		next[m.Partition]++
		p := want[[2]int64{int64(m.Partition), m.Offset}]
		if p == nil {
			t.Fatalf("unexpected message %d@%d", m.Partition, m.Offset)
		}
		k, _ := p.Key.Encode()
		v, _ := p.Value.Encode()
		if string(m.Key) != string(k) || string(m.Value) != string(v) {
			t.Errorf("%d@%d: got %s=%s, want %s=%s", m.Partition, m.Offset, m.Key, m.Value, k, v)
		}
		delete(want, [2]int64{int64(m.Partition), m.Offset})
	}
	if len(want) != 0 {
		t.Errorf("%d produced messages never handled", len(want))
	}
	if h := metricSum(t, reg, "onceonly_kafka_messages_handled_total", map[string]string{"group": group, "topic": topic}); h != n {
		t.Errorf("messages_handled_total = %v, want %d", h, n)
	}
}

func TestRunner_FailingHandlerRetriedInPlaceNeverCommittedPastThenRestConsumed(t *testing.T) {
	t.Parallel()
	const topic, group = "retry.events", "retry-group"
	brokers := testkit.Kafka(t, topic)
	a := admin(t, brokers)
	reg := prometheus.NewRegistry()

	// Round 1 (offsets 0..9 of partition 0) is committed first, so the check
	// below means something: the committed offset sits right at the failing
	// message (10) and must stay there until it succeeds.
	produce(t, brokers, topic, 10, 1, 0)
	const target = 10

	var (
		got             seen
		mu              sync.Mutex
		targetBatches   [][2]int64 // first and last offset of each call holding the target
		commitsWhileBad []int64
	)
	handler := func(_ context.Context, msgs []*sarama.ConsumerMessage) error {
		checkBatch(t, msgs, 100)
		first, last := msgs[0].Offset, msgs[len(msgs)-1].Offset
		if msgs[0].Partition == 0 && first <= target && target <= last {
			mu.Lock()
			targetBatches = append(targetBatches, [2]int64{first, last})
			failing := len(targetBatches) <= 2
			mu.Unlock()
			if failing {
				c := committed(t, a, group, topic)[0]
				mu.Lock()
				commitsWhileBad = append(commitsWhileBad, c)
				mu.Unlock()
				return errors.New("transient: database unavailable")
			}
		}
		got.add(msgs)
		return nil
	}
	startRunner(t, kafka.RunnerConfig{Brokers: brokers, Group: group, Topics: []string{topic},
		Handler: handler, Registerer: reg, Backoff: kafka.Backoff{Initial: 20 * time.Millisecond, Max: 100 * time.Millisecond}})

	eventually(t, 20*time.Second, "round 1 committed", func() bool { return committed(t, a, group, topic)[0] == target })
	produce(t, brokers, topic, 20, 1, 0) // offsets 10..29
	eventually(t, 20*time.Second, "everything after the failing message committed", func() bool {
		return committed(t, a, group, topic)[0] == 30
	})

	mu.Lock()
	defer mu.Unlock()
	if len(targetBatches) != 3 {
		t.Fatalf("handler called %d times with offset %d, want 3 (2 failures + 1 success)", len(targetBatches), target)
	}
	for i, b := range targetBatches {
		if b != targetBatches[0] || b[0] != target {
			t.Errorf("call %d got batch %v, want the same batch starting at the failing message as call 0 (%v)", i, b, targetBatches[0])
		}
	}
	for i, c := range commitsWhileBad {
		if c != target {
			t.Errorf("failure %d: committed offset %d while offset %d was failing, want %d", i, c, target, target)
		}
	}
	offsets := map[int64]int{}
	for _, m := range got.snapshot() {
		offsets[m.Offset]++
	}
	for o := range int64(30) {
		if offsets[o] != 1 {
			t.Errorf("offset %d handled successfully %d times, want 1", o, offsets[o])
		}
	}
	for name, want := range map[string]float64{"onceonly_kafka_handler_retries_total": 2, "onceonly_kafka_handler_errors_total": 2, "onceonly_kafka_messages_handled_total": 30} {
		if v := metricSum(t, reg, name, nil); v != want {
			t.Errorf("%s = %v, want %v", name, v, want)
		}
	}
}

func TestRunner_RestartResumesFromLastCommitNothingSkippedCommittedNotRedelivered(t *testing.T) {
	t.Parallel()
	const topic, group, n, maxBatch, stopAfter = "resume.events", "resume-group", 300, 10, 100
	brokers := testkit.Kafka(t, topic)
	produce(t, brokers, topic, n, 30, -1)
	end := endOffsets(t, brokers, topic)
	a := admin(t, brokers)

	// Runner 1 handles batches until stopAfter messages succeeded; the
	// batches after that hang until shutdown, like work in flight at a
	// deploy, and fail with the cancelled context.
	var firstSeen, firstOK seen
	var okCount, hanging atomic.Int64
	h1 := func(ctx context.Context, msgs []*sarama.ConsumerMessage) error {
		checkBatch(t, msgs, maxBatch)
		firstSeen.add(msgs)
		if okCount.Load() >= stopAfter {
			hanging.Add(1)
			<-ctx.Done()
			return ctx.Err()
		}
		okCount.Add(int64(len(msgs)))
		firstOK.add(msgs)
		return nil
	}
	stop1 := startRunner(t, kafka.RunnerConfig{Brokers: brokers, Group: group, Topics: []string{topic},
		Handler: h1, MaxBatch: maxBatch})
	eventually(t, 20*time.Second, "runner 1 to handle 100 messages and hang in the next batch", func() bool {
		return okCount.Load() >= stopAfter && hanging.Load() > 0
	})
	stop1()

	// What runner 1 committed is exactly what its handler returned nil for.
	c1 := committed(t, a, group, topic)
	nextOK := map[int32]int64{0: -1, 1: -1, 2: -1}
	for _, m := range firstOK.snapshot() {
		nextOK[m.Partition] = max(nextOK[m.Partition], m.Offset+1)
	}
	for p := range int32(partitions) {
		if c1[p] != nextOK[p] {
			t.Errorf("partition %d: committed %d after runner 1, want %d (one past its last successful message)", p, c1[p], nextOK[p])
		}
	}

	var second seen
	h2 := func(_ context.Context, msgs []*sarama.ConsumerMessage) error {
		checkBatch(t, msgs, maxBatch)
		second.add(msgs)
		return nil
	}
	startRunner(t, kafka.RunnerConfig{Brokers: brokers, Group: group, Topics: []string{topic},
		Handler: h2, MaxBatch: maxBatch})
	eventually(t, 20*time.Second, "runner 2 to commit to the end", func() bool {
		c := committed(t, a, group, topic)
		return c[0] == end[0] && c[1] == end[1] && c[2] == end[2]
	})

	handledBy1 := map[[2]int64]bool{}
	for _, m := range firstSeen.snapshot() {
		handledBy1[[2]int64{int64(m.Partition), m.Offset}] = true
	}
	all := map[[2]int64]bool{}
	for k := range handledBy1 {
		all[k] = true
	}
	redelivered := map[int32]int{}
	firstOf2 := map[int32]int64{}
	for _, m := range second.snapshot() {
		k := [2]int64{int64(m.Partition), m.Offset}
		all[k] = true
		if _, ok := firstOf2[m.Partition]; !ok {
			firstOf2[m.Partition] = m.Offset
		}
		if start := max(c1[m.Partition], 0); m.Offset < start {
			t.Errorf("committed message %d@%d (committed %d) delivered again", m.Partition, m.Offset, c1[m.Partition])
		}
		if handledBy1[k] {
			redelivered[m.Partition]++
		}
	}
	for p := range int32(partitions) {
		if f, ok := firstOf2[p]; ok && f != max(c1[p], 0) {
			t.Errorf("partition %d: runner 2 started at %d, want the committed offset %d", p, f, max(c1[p], 0))
		}
		if redelivered[p] > maxBatch {
			t.Errorf("partition %d: %d messages redelivered, want at most the in-flight batch (%d)", p, redelivered[p], maxBatch)
		}
		for o := range end[p] {
			if !all[[2]int64{int64(p), o}] {
				t.Errorf("message %d@%d skipped: handled by neither runner", p, o)
			}
		}
	}
	// The batch that hung at shutdown was not lost: it came again.
	if redelivered[0]+redelivered[1]+redelivered[2] == 0 {
		t.Error("the batch in flight at shutdown was not redelivered")
	}
	t.Logf("runner 1 committed %v; redelivered per partition %v", c1, redelivered)
}
