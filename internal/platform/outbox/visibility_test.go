package outbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/onceonly/onceonly/internal/platform/db"
	"github.com/onceonly/onceonly/internal/platform/outbox"
	"github.com/onceonly/onceonly/internal/platform/testkit"
)

// The hazard that makes a "last id sent" cursor lose events, forced rather
// than hoped for: a transaction takes the lower id, a second one takes a
// higher id and commits, the relay publishes it, and only then does the
// first commit. Its event must still be published.
func TestRelay_LowerIDCommittedAfterAHigherOneWasPublishedIsNotSkipped(t *testing.T) {
	t.Parallel()
	gdb, _ := openDB(t, 6)
	if db.DialectOf(gdb) == db.SQLite {
		t.Skip("SQLite has one writer: ids become visible in commit order, the hazard cannot occur")
	}
	rdb, prefix := testkit.Redis(t)
	brokers := testkit.Kafka(t, topic)
	r, _ := newRelay(t, outbox.RelayConfig{DB: gdb, Locker: locker(t, gdb, rdb.Options().Addr, prefix), Brokers: brokers,
		PollInterval: 10 * time.Millisecond, Logger: testkit.Logger(t)})
	startRelay(t, r)

	ctx := context.Background()
	slow := gdb.WithContext(ctx).Begin()
	if err := outbox.Add(slow, event("low", "order-1")); err != nil {
		t.Fatal(err)
	}
	add(t, gdb, event("high", "order-2")) // commits with a higher id
	waitFor(t, 30*time.Second, "the higher id published", func() bool {
		return count(t, gdb, "event_id = ? AND published_at IS NOT NULL", "high") == 1
	})
	if err := slow.Commit().Error; err != nil {
		t.Fatal(err)
	}
	if ids := rowIDs(t, gdb); ids["low"] >= ids["high"] {
		t.Fatalf("setup: low id %d is not below high id %d", ids["low"], ids["high"])
	}
	waitFor(t, 30*time.Second, "the lower id, committed last, published", func() bool {
		return count(t, gdb, "event_id = ? AND published_at IS NOT NULL", "low") == 1
	})
	recs := readTopic(t, brokers, topic)
	checkTopic(t, recs, rowIDs(t, gdb))
}
