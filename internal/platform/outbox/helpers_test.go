package outbox_test

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"gorm.io/gorm"

	"github.com/onceonly/onceonly/internal/platform/db"
	"github.com/onceonly/onceonly/internal/platform/lock"
	"github.com/onceonly/onceonly/internal/platform/outbox"
	"github.com/onceonly/onceonly/internal/platform/testkit"
)

const topic = "payment.events"

func TestMain(m *testing.M) {
	// The crash test re-executes this binary as a relay (crash_test.go).
	if os.Getenv(childEnv) != "" {
		os.Exit(childRelay())
	}
	os.Exit(m.Run())
}

func migrations() []db.Migration { return append(lock.Migrations(), outbox.Migrations()...) }

// openDB creates a fresh database with the outbox and fence tables and
// returns it with its DSN (for a child process).
func openDB(t testing.TB, maxOpen int) (*gorm.DB, string) {
	t.Helper()
	dsn := testkit.DSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	gdb, err := db.Open(ctx, dsn, db.Options{MaxOpenConns: maxOpen})
	if err != nil {
		t.Fatalf("open test database: %v", err)
	}
	t.Cleanup(func() { _ = db.Close(gdb) })
	if err := db.Migrate(ctx, gdb, nil, migrations()...); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return gdb, dsn
}

// locker builds a lock Runner on the test's Redis namespace.
func locker(t testing.TB, gdb *gorm.DB, addr, prefix string) *lock.Runner {
	t.Helper()
	r, err := lock.New(lock.Config{Addrs: []string{addr}, DB: gdb, KeyPrefix: prefix, Expiry: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// startRelay runs r in the background; the returned stop cancels it and
// waits for Run to return (also at test end, before the cluster closes).
func startRelay(t testing.TB, r *outbox.Relay) (stop func()) {
	t.Helper()
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
			case <-time.After(30 * time.Second):
				t.Errorf("Run did not return within 30 s of cancel")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// newRelay builds a relay with a registry of its own.
func newRelay(t testing.TB, cfg outbox.RelayConfig) (*outbox.Relay, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	if cfg.Registerer == nil {
		cfg.Registerer = reg
	}
	r, err := outbox.NewRelay(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r, reg
}

// event is the Message of the i-th test event of key.
func event(id, key string) outbox.Message {
	return outbox.Message{
		EventID: id, Topic: topic, Key: key,
		Payload: []byte(fmt.Sprintf(`{"event_id":%q,"order_id":%q}`, id, key)),
		Headers: map[string]string{"type": "payment.succeeded", "request_id": "req-" + id},
	}
}

// add commits one event in its own transaction.
func add(t testing.TB, gdb *gorm.DB, m outbox.Message) {
	t.Helper()
	if err := gdb.Transaction(func(tx *gorm.DB) error { return outbox.Add(tx, m) }); err != nil {
		t.Fatalf("add %s: %v", m.EventID, err)
	}
}

// addN commits n events e-<prefix>-<i> over keys keys, each in its own
// transaction, and returns their ids in commit order.
func addN(t testing.TB, gdb *gorm.DB, prefix string, n, keys int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range n {
		ids[i] = fmt.Sprintf("e-%s-%05d", prefix, i)
		add(t, gdb, event(ids[i], fmt.Sprintf("order-%s-%d", prefix, i%keys)))
	}
	return ids
}

// addInOneTx commits n events e-<prefix>-<i> in a single transaction (fast
// set-up of many rows).
func addInOneTx(t testing.TB, gdb *gorm.DB, prefix string, n, keys int) {
	t.Helper()
	err := gdb.Transaction(func(tx *gorm.DB) error {
		for i := range n {
			if err := outbox.Add(tx, event(fmt.Sprintf("e-%s-%05d", prefix, i), fmt.Sprintf("order-%s-%d", prefix, i%keys))); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("add %d events: %v", n, err)
	}
}

func count(t testing.TB, gdb *gorm.DB, where string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := gdb.Raw("SELECT COUNT(*) FROM outbox_events WHERE "+where, args...).Scan(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

// waitPublished waits until no row is unpublished and at least n are published.
func waitPublished(t testing.TB, gdb *gorm.DB, n int64, timeout time.Duration) {
	t.Helper()
	waitFor(t, timeout, fmt.Sprintf("%d events marked published", n), func() bool {
		return count(t, gdb, "published_at IS NOT NULL") >= n && count(t, gdb, "published_at IS NULL") == 0
	})
}

func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// record is one message read back from the topic.
type record struct {
	Partition int32
	Offset    int64
	Key       string
	EventID   string
	Headers   map[string]string
	Value     []byte
}

// readTopic reads every record of topic from the start to the current end.
func readTopic(t testing.TB, brokers []string, topic string) []record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("end offsets: %v", err)
	}
	left := map[int32]int64{} // partition -> end offset still to reach
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			t.Fatalf("end offset %s/%d: %v", o.Topic, o.Partition, o.Err)
		}
		if o.Offset > 0 {
			left[o.Partition] = o.Offset
		}
	})
	var out []record
	for len(left) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s: %v (still to read: %v)", topic, ctx.Err(), left)
		}
		fs.EachError(func(_ string, p int32, err error) { t.Logf("fetch %d: %v", p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			rec := record{Partition: r.Partition, Offset: r.Offset, Key: string(r.Key), Value: r.Value, Headers: map[string]string{}}
			for _, h := range r.Headers {
				rec.Headers[h.Key] = string(h.Value)
			}
			rec.EventID = rec.Headers["event_id"]
			out = append(out, rec)
			if end, ok := left[r.Partition]; ok && r.Offset+1 >= end {
				delete(left, r.Partition)
			}
		})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Partition != out[j].Partition {
			return out[i].Partition < out[j].Partition
		}
		return out[i].Offset < out[j].Offset
	})
	return out
}

// rowIDs maps every event id in the table to its row id.
func rowIDs(t testing.TB, gdb *gorm.DB) map[string]int64 {
	t.Helper()
	var rows []struct {
		ID      int64
		EventID string
	}
	if err := gdb.Raw("SELECT id, event_id FROM outbox_events").Scan(&rows).Error; err != nil {
		t.Fatal(err)
	}
	m := make(map[string]int64, len(rows))
	for _, r := range rows {
		m[r.EventID] = r.ID
	}
	return m
}

// checkTopic asserts that every event of ids is on the topic, nothing else
// is, and per key the first occurrences are in row id order (the commit order
// of one key's events). It returns the number of duplicates.
func checkTopic(t testing.TB, recs []record, ids map[string]int64) (dups int) {
	t.Helper()
	seen := map[string]bool{}
	lastID := map[string]int64{} // key -> row id of its last first occurrence
	partOf := map[string]int32{}
	disorders := 0
	for _, r := range recs {
		id, ok := ids[r.EventID]
		if !ok {
			t.Errorf("unexpected event %q on the topic", r.EventID)
			continue
		}
		if p, ok := partOf[r.Key]; ok && p != r.Partition {
			t.Errorf("key %s in partitions %d and %d", r.Key, p, r.Partition)
		}
		partOf[r.Key] = r.Partition
		if seen[r.EventID] {
			dups++
			continue
		}
		seen[r.EventID] = true
		if last, ok := lastID[r.Key]; ok && id < last {
			if disorders++; disorders <= 10 {
				t.Errorf("key %s: event %s (id %d) first appears after id %d", r.Key, r.EventID, id, last)
			}
		}
		lastID[r.Key] = id
	}
	var missing []string
	for e := range ids {
		if !seen[e] {
			missing = append(missing, e)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		t.Errorf("%d of %d events missing from the topic, e.g. %s", len(missing), len(ids), strings.Join(missing[:min(5, len(missing))], ", "))
	}
	if disorders > 0 {
		t.Errorf("%d events first appear out of id order for their key", disorders)
	}
	return dups
}

// metricValue returns the value of a counter or gauge without labels (or the
// sum over its label values; for a histogram, its sample count).
func metricValue(t testing.TB, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			switch {
			case m.GetCounter() != nil:
				sum += m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				sum += m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				sum += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return sum
}

// percentile returns the p-th percentile (0..100) of sorted durations.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1) * p / 100)
	return sorted[i]
}
