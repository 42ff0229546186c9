package lock_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"

	"github.com/onceonly/onceonly/internal/platform/db"
	"github.com/onceonly/onceonly/internal/platform/lock"
	"github.com/onceonly/onceonly/internal/platform/testkit"
)

func TestMain(m *testing.M) {
	// The pause test re-executes this binary as holder A (see pause_test.go).
	if os.Getenv(childEnv) != "" {
		os.Exit(childHolder())
	}
	os.Exit(m.Run())
}

// writesTable records every write a holder got accepted, so a test counts
// stale writes in the database rather than trusting the holder's report.
var writesTable = db.Migration{
	ID: "locktest_0001_writes",
	Up: db.SQL(
		[]string{"CREATE TABLE IF NOT EXISTS lock_test_writes (id BIGINT AUTO_INCREMENT PRIMARY KEY, job VARCHAR(100) NOT NULL, holder VARCHAR(20) NOT NULL, token BIGINT NOT NULL)"},
		[]string{"CREATE TABLE IF NOT EXISTS lock_test_writes (id INTEGER PRIMARY KEY AUTOINCREMENT, job TEXT NOT NULL, holder TEXT NOT NULL, token INTEGER NOT NULL)"},
	),
}

func migrations() []db.Migration { return append(lock.Migrations(), writesTable) }

// write is a job's fenced write: one row naming the holder.
func write(ctx context.Context, gdb *gorm.DB, f lock.Fence, holder string) error {
	return f.Tx(ctx, gdb, func(tx *gorm.DB) error {
		return tx.Exec("INSERT INTO lock_test_writes (job, holder, token) VALUES (?, ?, ?)", f.Job(), holder, f.Token()).Error
	})
}

func countWrites(t testing.TB, gdb *gorm.DB, job, holder string) int64 {
	t.Helper()
	var n int64
	if err := gdb.Raw("SELECT COUNT(*) FROM lock_test_writes WHERE job = ? AND holder = ?", job, holder).Scan(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

// newRunner builds a Runner closed when the test ends. Stop every Run before
// the test returns: the runner logs into the test.
func newRunner(t testing.TB, cfg lock.Config) *lock.Runner {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testkit.Logger(t)
	}
	r, err := lock.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// waitFor polls cond until it holds or the deadline passes.
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

// recv waits for one value from ch.
func recv[T any](t testing.TB, ch <-chan T, timeout time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(timeout):
		t.Fatalf("timed out after %s waiting for %s", timeout, what)
		panic("unreachable")
	}
}

// metricValue sums the samples of a counter family whose labels include want.
func metricValue(t testing.TB, reg *prometheus.Registry, name string, want map[string]string) float64 {
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
	metric:
		for _, m := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if have[k] != v {
					continue metric
				}
			}
			switch {
			case m.GetCounter() != nil:
				sum += m.GetCounter().GetValue()
			case m.GetHistogram() != nil:
				sum += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return sum
}
