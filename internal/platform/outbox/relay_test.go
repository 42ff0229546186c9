package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/onceonly/onceonly/internal/platform/outbox"
	"github.com/onceonly/onceonly/internal/platform/testkit"
)

func TestRelay_PublishesKeyPayloadAndHeadersOfEachEvent(t *testing.T) {
	t.Parallel()
	gdb, _ := openDB(t, 6)
	rdb, prefix := testkit.Redis(t)
	brokers := testkit.Kafka(t, topic)
	add(t, gdb, event("e-1", "order-1"))
	add(t, gdb, outbox.Message{EventID: "e-2", Topic: topic}) // no key, no payload, no headers

	r, reg := newRelay(t, outbox.RelayConfig{DB: gdb, Locker: locker(t, gdb, rdb.Options().Addr, prefix), Brokers: brokers,
		PollInterval: 20 * time.Millisecond, Logger: testkit.Logger(t)})
	startRelay(t, r)
	waitPublished(t, gdb, 2, 30*time.Second)

	recs := readTopic(t, brokers, topic)
	checkTopic(t, recs, rowIDs(t, gdb))
	for _, rec := range recs {
		switch rec.EventID {
		case "e-1":
			want := event("e-1", "order-1")
			if rec.Key != want.Key || string(rec.Value) != string(want.Payload) || rec.Headers["type"] != "payment.succeeded" ||
				rec.Headers["request_id"] != "req-e-1" {
				t.Errorf("e-1 on the topic: %+v", rec)
			}
		case "e-2":
			if rec.Key != "" || len(rec.Value) != 0 || len(rec.Headers) != 1 {
				t.Errorf("e-2 on the topic: %+v", rec)
			}
		}
	}
	if got := metricValue(t, reg, "onceonly_outbox_backlog"); got != 0 {
		t.Errorf("backlog after publishing = %v", got)
	}
	if got := metricValue(t, reg, "onceonly_outbox_marked_total"); got != 2 {
		t.Errorf("marked_total = %v, want 2", got)
	}
}

func TestRelay_NotifyPublishesWithoutWaitingForThePoll(t *testing.T) {
	t.Parallel()
	gdb, _ := openDB(t, 6)
	rdb, prefix := testkit.Redis(t)
	brokers := testkit.Kafka(t, topic)
	const poll = 30 * time.Second
	acked := make(chan time.Time, 10)
	r, _ := newRelay(t, outbox.RelayConfig{DB: gdb, Locker: locker(t, gdb, rdb.Options().Addr, prefix), Brokers: brokers,
		PollInterval: poll, Logger: testkit.Logger(t)})
	outbox.SetAfterPublish(r, func([]string) { acked <- time.Now() })
	startRelay(t, r)
	add(t, gdb, event("e-warmup", "order-1")) // the first round may run before or after it: wait for both
	r.Notify()
	select {
	case <-acked:
	case <-time.After(20 * time.Second):
		t.Fatal("warm-up event not published")
	}
	var worst time.Duration
	for i := range 5 {
		time.Sleep(50 * time.Millisecond) // the relay is idle, waiting for the 30 s poll
		add(t, gdb, event(fmt.Sprintf("e-%d", i), "order-1"))
		committed := time.Now()
		r.Notify()
		select {
		case at := <-acked:
			worst = max(worst, at.Sub(committed))
		case <-time.After(poll / 2):
			t.Fatalf("event %d not published within %s of its Notify (poll %s)", i, poll/2, poll)
		}
	}
	t.Logf("commit → acknowledged with Notify (poll %s): worst of 5 = %s", poll, worst)
}

// fakeProducer fails chosen events on their first send and records every
// SendMessages call (event ids, and whether each was acknowledged).
type fakeProducer struct {
	sarama.SyncProducer // only SendMessages and Close are called
	mu                  sync.Mutex
	failOnce            map[string]bool
	failAll             bool
	calls               [][]string
	acked               []string // in acknowledgement order
}

func (f *fakeProducer) SendMessages(msgs []*sarama.ProducerMessage) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ids []string
	var errs sarama.ProducerErrors
	for _, m := range msgs {
		id := headerOf(m, "event_id")
		ids = append(ids, id)
		if f.failAll || f.failOnce[id] {
			delete(f.failOnce, id)
			errs = append(errs, &sarama.ProducerError{Msg: m, Err: sarama.ErrNotEnoughReplicas})
			continue
		}
		f.acked = append(f.acked, id)
	}
	f.calls = append(f.calls, ids)
	if len(errs) > 0 {
		return errs
	}
	return nil
}

func (f *fakeProducer) Close() error { return nil }

func (f *fakeProducer) set(failAll bool) { f.mu.Lock(); f.failAll = failAll; f.mu.Unlock() }

func headerOf(m *sarama.ProducerMessage, name string) string {
	for _, h := range m.Headers {
		if string(h.Key) == name {
			return string(h.Value)
		}
	}
	return ""
}

func TestRelay_PartialFailureNeverSendsALaterEventOfTheSameKeyFirst(t *testing.T) {
	t.Parallel()
	gdb, _ := openDB(t, 6)
	rdb, prefix := testkit.Redis(t)
	// e1..e6 over keys A B A C B A; e1 (A) fails on its first send.
	keys := []string{"A", "B", "A", "C", "B", "A"}
	for i, k := range keys {
		add(t, gdb, event(fmt.Sprintf("e%d", i+1), k))
	}
	fp := &fakeProducer{failOnce: map[string]bool{"e1": true}}
	r, reg := newRelay(t, outbox.RelayConfig{DB: gdb, Locker: locker(t, gdb, rdb.Options().Addr, prefix), Producer: fp,
		PollInterval: 20 * time.Millisecond, Backoff: func(int) time.Duration { return 10 * time.Millisecond }, Logger: testkit.Logger(t)})
	startRelay(t, r)
	waitPublished(t, gdb, 6, 30*time.Second)

	fp.mu.Lock()
	calls, acked := fp.calls, fp.acked
	fp.mu.Unlock()
	t.Logf("SendMessages calls: %v", calls)
	// Nothing of key A after e1 may have been sent (not just acknowledged)
	// before e1 was acknowledged; B and C go on.
	want := [][]string{{"e1", "e2", "e4"}, {"e5"}, {"e1"}, {"e3"}, {"e6"}}
	if fmt.Sprint(calls) != fmt.Sprint(want) {
		t.Errorf("SendMessages calls = %v, want %v", calls, want)
	}
	pos := map[string]int{}
	for i, id := range acked {
		pos[id] = i
	}
	for _, pair := range [][2]string{{"e1", "e3"}, {"e3", "e6"}, {"e2", "e5"}} {
		if pos[pair[0]] > pos[pair[1]] {
			t.Errorf("%s acknowledged after %s of the same key", pair[0], pair[1])
		}
	}
	if n := count(t, gdb, "event_id = 'e1' AND attempts = 1 AND last_error LIKE '%replicas%'"); n != 1 {
		t.Error("e1's failed attempt and error are not recorded")
	}
	if got := metricValue(t, reg, "onceonly_outbox_publish_errors_total"); got != 1 {
		t.Errorf("publish_errors_total = %v, want 1", got)
	}
}

func TestRelay_BrokerErrorsMarkNothingAndRetryFromTheFirstUnpublished(t *testing.T) {
	t.Parallel()
	gdb, _ := openDB(t, 6)
	rdb, prefix := testkit.Redis(t)
	for i := range 10 {
		add(t, gdb, event(fmt.Sprintf("e%02d", i), fmt.Sprintf("k%d", i%3)))
	}
	fp := &fakeProducer{failAll: true}
	var mu sync.Mutex
	var waits []int
	r, reg := newRelay(t, outbox.RelayConfig{DB: gdb, Locker: locker(t, gdb, rdb.Options().Addr, prefix), Producer: fp,
		PollInterval: 20 * time.Millisecond, Logger: testkit.Logger(t),
		Backoff: func(n int) time.Duration {
			mu.Lock()
			waits = append(waits, n)
			mu.Unlock()
			return 20 * time.Millisecond
		}})
	startRelay(t, r)
	waitFor(t, 30*time.Second, "3 failed rounds", func() bool { return metricValue(t, reg, "onceonly_outbox_publish_errors_total") >= 9 })
	if n := count(t, gdb, "published_at IS NOT NULL"); n != 0 {
		t.Fatalf("%d rows marked while every send failed", n)
	}
	if n := count(t, gdb, "attempts >= 2"); n != 3 {
		t.Errorf("%d rows with attempts recorded, want the 3 heads of the keys (only they were sent)", n)
	}
	fp.set(false)
	waitPublished(t, gdb, 10, 30*time.Second)
	mu.Lock()
	defer mu.Unlock()
	for i, n := range waits {
		if n != i+1 {
			t.Fatalf("Backoff called with %v, want 1, 2, 3, ... (consecutive failures)", waits)
		}
	}
}

func TestRelay_ConfigIsChecked(t *testing.T) {
	t.Parallel()
	gdb, _ := openDB(t, 2)
	rdb, prefix := testkit.Redis(t)
	lk := locker(t, gdb, rdb.Options().Addr, prefix)
	for name, cfg := range map[string]outbox.RelayConfig{
		"no DB":             {Locker: lk, Brokers: []string{"x:1"}},
		"no locker":         {DB: gdb, Brokers: []string{"x:1"}},
		"no brokers":        {DB: gdb, Locker: lk},
		"negative poll":     {DB: gdb, Locker: lk, Brokers: []string{"x:1"}, PollInterval: -1},
		"batch over 1000":   {DB: gdb, Locker: lk, Brokers: []string{"x:1"}, BatchSize: 1001},
		"negative retainer": {DB: gdb, Locker: lk, Brokers: []string{"x:1"}, Retention: -time.Hour},
	} {
		if _, err := outbox.NewRelay(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	r, err := outbox.NewRelay(outbox.RelayConfig{DB: gdb, Locker: lk, Brokers: []string{"127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	time.Sleep(50 * time.Millisecond)
	if err := r.Run(ctx); err == nil || errors.Is(err, context.Canceled) {
		t.Errorf("a second concurrent Run: want an error, got %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run after cancel: %v", err)
	}
}

func TestRelay_ShutdownRightAfterAPublishStillMarksIt(t *testing.T) {
	t.Parallel()
	gdb, _ := openDB(t, 6)
	rdb, prefix := testkit.Redis(t)
	brokers := testkit.Kafka(t, topic)
	const n = 20
	addN(t, gdb, "stop", n, 3)
	r, _ := newRelay(t, outbox.RelayConfig{DB: gdb, Locker: locker(t, gdb, rdb.Options().Addr, prefix), Brokers: brokers,
		Logger: testkit.Logger(t)})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	outbox.SetAfterPublish(r, func([]string) { cancel() }) // SIGTERM lands between publish and mark
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	if marked := count(t, gdb, "published_at IS NOT NULL"); marked != n {
		t.Fatalf("%d of %d published events marked after a graceful stop: the rest would be republished", marked, n)
	}
	if dups := checkTopic(t, readTopic(t, brokers, topic), rowIDs(t, gdb)); dups != 0 {
		t.Errorf("%d duplicates", dups)
	}
}
