package lock_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/onceonly/onceonly/internal/platform/lock"
	"github.com/onceonly/onceonly/internal/platform/testkit"
)

// Figures (never asserted): run against real servers with
//
//	TEST_MYSQL_DSN='root:@tcp(127.0.0.1:3306)/' TEST_REDIS_ADDR=127.0.0.1:6379 \
//	  go test -run '^$' -bench . -benchtime 2s ./internal/platform/lock/
//
// BenchmarkRedisRoundTrip is the baseline: one SET on the same Redis.

// BenchmarkAcquireAndFence is one whole tick: acquire the lock, take a token,
// one empty fenced transaction, release.
func BenchmarkAcquireAndFence(b *testing.B) {
	gdb := testkit.DB(b, 5, lock.Migrations()...)
	rdb, prefix := testkit.Redis(b)
	r, err := lock.New(lock.Config{Addrs: []string{rdb.Options().Addr}, KeyPrefix: prefix, DB: gdb})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	ctx := context.Background()
	noop := func(*gorm.DB) error { return nil }
	var lat []time.Duration
	for b.Loop() {
		start := time.Now()
		err := r.RunOnce(ctx, "bench", func(ctx context.Context, f lock.Fence) error { return f.Tx(ctx, gdb, noop) })
		if err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	reportPercentiles(b, lat)
}

// BenchmarkFenceTx is the database's share: one empty fenced transaction
// (the check is an UPDATE of the fence row, then COMMIT).
func BenchmarkFenceTx(b *testing.B) {
	gdb := testkit.DB(b, 5, lock.Migrations()...)
	rdb, prefix := testkit.Redis(b)
	r, err := lock.New(lock.Config{Addrs: []string{rdb.Options().Addr}, KeyPrefix: prefix, DB: gdb})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	ctx := context.Background()
	var fence lock.Fence // stays the newest: nobody else acquires "bench"
	if err := r.RunOnce(ctx, "bench", func(_ context.Context, f lock.Fence) error { fence = f; return nil }); err != nil {
		b.Fatal(err)
	}
	noop := func(*gorm.DB) error { return nil }
	var lat []time.Duration
	for b.Loop() {
		start := time.Now()
		if err := fence.Tx(ctx, gdb, noop); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	reportPercentiles(b, lat)
}

// BenchmarkRedisRoundTrip is the baseline: one SET.
func BenchmarkRedisRoundTrip(b *testing.B) {
	rdb, prefix := testkit.Redis(b)
	ctx := context.Background()
	var lat []time.Duration
	for b.Loop() {
		start := time.Now()
		if err := rdb.Set(ctx, prefix+"rtt", "x", time.Minute).Err(); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	reportPercentiles(b, lat)
}

func reportPercentiles(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	at := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds())
	}
	b.ReportMetric(at(0.50), "p50-µs")
	b.ReportMetric(at(0.99), "p99-µs")
}
