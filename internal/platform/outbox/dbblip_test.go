package outbox_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/onceonly/onceonly/internal/platform/db"
	"github.com/onceonly/onceonly/internal/platform/outbox"
	"github.com/onceonly/onceonly/internal/platform/testkit"
)

func TestRelay_DatabaseBlipBetweenPublishAndMarkRepublishesNothing(t *testing.T) {
	t.Parallel()
	gdb, dsn := openDB(t, 4)
	if db.DialectOf(gdb) != db.MySQL {
		testkit.NeedReal(t, "cutting the database connection needs MySQL (TEST_MYSQL_DSN)")
	}
	rdb, prefix := testkit.Redis(t)
	brokers := testkit.Kafka(t, topic)
	const n = 40
	addN(t, gdb, "blip", n, 3)

	// The relay reaches the database through a proxy that the test cuts
	// right after the broker acknowledged the first batch.
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	px := testkit.NewProxy(t, cfg.Addr)
	cfg.Addr = px.Addr
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	relayDB, err := db.Open(ctx, cfg.FormatDSN(), db.Options{MaxOpenConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close(relayDB) })

	r, reg := newRelay(t, outbox.RelayConfig{DB: relayDB, Locker: locker(t, relayDB, rdb.Options().Addr, prefix), Brokers: brokers,
		BatchSize: 25, PollInterval: 20 * time.Millisecond, Logger: testkit.Logger(t),
		Backoff: func(int) time.Duration { return 50 * time.Millisecond }})
	var once sync.Once
	outbox.SetAfterPublish(r, func([]string) { once.Do(px.Cut) })
	startRelay(t, r)
	waitFor(t, 30*time.Second, "the mark to fail", func() bool {
		return metricValue(t, reg, "onceonly_outbox_db_errors_total") >= 1
	})
	if marked := count(t, gdb, "published_at IS NOT NULL"); marked != 0 {
		t.Fatalf("%d rows marked through a cut connection", marked)
	}
	time.Sleep(300 * time.Millisecond) // a few failing rounds
	px.Restore()
	waitPublished(t, gdb, n, 30*time.Second)
	dups := checkTopic(t, readTopic(t, brokers, topic), rowIDs(t, gdb))
	if dups != 0 {
		t.Errorf("%d duplicates: the acknowledged batch was published again instead of its lost mark being retried", dups)
	}
}
