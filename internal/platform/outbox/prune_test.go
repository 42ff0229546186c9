package outbox_test

import (
	"testing"
	"time"

	"github.com/onceonly/onceonly/internal/platform/db"
	"github.com/onceonly/onceonly/internal/platform/outbox"
	"github.com/onceonly/onceonly/internal/platform/testkit"
)

func TestRelay_PruneRemovesOnlyPublishedRowsOlderThanRetention(t *testing.T) {
	t.Parallel()
	gdb, _ := openDB(t, 6)
	rdb, prefix := testkit.Redis(t)
	brokers := testkit.Kafka(t, topic)
	now := db.Now()
	for id, at := range map[string][2]any{ // created_at, published_at
		"old-published":    {now.Add(-3 * time.Hour), now.Add(-2 * time.Hour)},
		"recent-published": {now.Add(-3 * time.Hour), now.Add(-10 * time.Minute)},
		"old-unpublished":  {now.Add(-3 * time.Hour), nil},
	} {
		add(t, gdb, event(id, "order-"+id))
		if err := gdb.Exec("UPDATE outbox_events SET created_at = ?, published_at = ? WHERE event_id = ?", at[0], at[1], id).Error; err != nil {
			t.Fatal(err)
		}
	}
	// 1,500 more old published rows: pruning goes in bounded batches.
	addInOneTx(t, gdb, "bulk", 1500, 50)
	if err := gdb.Exec("UPDATE outbox_events SET published_at = ? WHERE event_id LIKE 'e-bulk%'", now.Add(-5*time.Hour)).Error; err != nil {
		t.Fatal(err)
	}

	r, reg := newRelay(t, outbox.RelayConfig{DB: gdb, Locker: locker(t, gdb, rdb.Options().Addr, prefix), Brokers: brokers,
		Retention: time.Hour, PollInterval: 20 * time.Millisecond, Logger: testkit.Logger(t)})
	outbox.SetPruneEvery(r, 50*time.Millisecond)
	startRelay(t, r)
	// The old unpublished row is published now, and then young: it stays.
	waitFor(t, 30*time.Second, "old rows pruned and the unpublished one published", func() bool {
		return count(t, gdb, "1=1") == 2 && count(t, gdb, "published_at IS NULL") == 0
	})
	for id, want := range map[string]int64{"old-published": 0, "recent-published": 1, "old-unpublished": 1} {
		if got := count(t, gdb, "event_id = ?", id); got != want {
			t.Errorf("%s: %d rows, want %d", id, got, want)
		}
	}
	if got := metricValue(t, reg, "onceonly_outbox_pruned_total"); got != 1501 {
		t.Errorf("pruned_total = %v, want 1501", got)
	}
	time.Sleep(200 * time.Millisecond) // a few more prunes: nothing else goes
	if got := count(t, gdb, "1=1"); got != 2 {
		t.Errorf("%d rows left after further prunes, want 2", got)
	}
}
