package lock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/onceonly/onceonly/internal/platform/db"
	"github.com/onceonly/onceonly/internal/platform/lock"
	"github.com/onceonly/onceonly/internal/platform/testkit"
)

func TestRun_FiveRunnersNeverOverlapInTheCriticalSection(t *testing.T) {
	t.Parallel()
	gdb := testkit.DB(t, 10, migrations()...)
	rdb, prefix := testkit.Redis(t)
	const runners, wantRuns, job = 5, 200, "mutex"

	var (
		inside, overlaps, runs, accepted, failed atomic.Int64
		mu                                       sync.Mutex
		tokens                                   []int64
		wins                                     = map[int]int{}
	)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	reg := prometheus.NewRegistry() // shared, as by the Runners of one process
	for i := range runners {
		r := newRunner(t, lock.Config{Addrs: []string{rdb.Options().Addr}, KeyPrefix: prefix, Expiry: 2 * time.Second,
			DB: gdb, Instance: fmt.Sprintf("runner-%d", i), Registerer: reg})
		wg.Go(func() {
			_ = r.Run(ctx, job, 5*time.Millisecond, func(ctx context.Context, f lock.Fence) error {
				// The section checks exclusion itself: it does not trust the lock.
				if inside.Add(1) != 1 {
					overlaps.Add(1)
				}
				defer inside.Add(-1)
				mu.Lock()
				tokens = append(tokens, f.Token())
				wins[i]++
				mu.Unlock()
				time.Sleep(time.Millisecond)
				err := write(ctx, gdb, f, "any")
				switch {
				case err == nil:
					accepted.Add(1)
				case ctx.Err() == nil: // not the shutdown at the end of the test
					failed.Add(1)
				}
				runs.Add(1)
				return err
			})
		})
	}
	waitFor(t, 45*time.Second, fmt.Sprintf("%d job runs", wantRuns), func() bool { return runs.Load() >= wantRuns })
	cancel()
	wg.Wait()

	if n := overlaps.Load(); n != 0 {
		t.Errorf("critical section overlapped %d times", n)
	}
	if n := failed.Load(); n != 0 {
		t.Errorf("%d fenced writes failed while every holder held the lock", n)
	}
	if len(wins) < 2 {
		t.Errorf("only runners %v ever won the lock; want at least 2 to compete", wins)
	}
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Fatalf("tokens not strictly increasing in run order: %d after %d", tokens[i], tokens[i-1])
		}
	}
	if got := countWrites(t, gdb, job, "any"); got != accepted.Load() || got < wantRuns-runners {
		t.Errorf("database holds %d writes, want %d (one per accepted run)", got, accepted.Load())
	}
	if v := metricValue(t, reg, "onceonly_lock_acquisitions_total", map[string]string{"job": job}); v < float64(runs.Load()) {
		t.Errorf("acquisitions_total = %v, want at least %d", v, runs.Load())
	}
	if v := metricValue(t, reg, "onceonly_lock_contended_total", map[string]string{"job": job}); v == 0 {
		t.Error("contended_total = 0: the runners never competed")
	}
	t.Logf("%d runs by runners %v, 0 overlaps", runs.Load(), wins)
}

func TestRunOnce_ReturnsErrHeldWithoutRunningWhileAnotherInstanceHolds(t *testing.T) {
	t.Parallel()
	gdb := testkit.DB(t, 5, migrations()...)
	rdb, prefix := testkit.Redis(t)
	cfg := lock.Config{Addrs: []string{rdb.Options().Addr}, KeyPrefix: prefix, DB: gdb}
	a, b := newRunner(t, cfg), newRunner(t, cfg)

	held, release := make(chan lock.Fence, 1), make(chan struct{})
	aDone := make(chan error, 1)
	go func() {
		aDone <- a.RunOnce(context.Background(), "held", func(ctx context.Context, f lock.Fence) error {
			held <- f
			<-release
			return nil
		})
	}()
	fa := recv(t, held, 10*time.Second, "A to hold the lock")

	ran := false
	err := b.RunOnce(context.Background(), "held", func(context.Context, lock.Fence) error { ran = true; return nil })
	if !errors.Is(err, lock.ErrHeld) || ran {
		t.Fatalf("B while A holds: err %v, ran %v; want ErrHeld and not run", err, ran)
	}
	close(release)
	if err := recv(t, aDone, 10*time.Second, "A to finish"); err != nil {
		t.Fatal(err)
	}

	var fb lock.Fence
	if err := b.RunOnce(context.Background(), "held", func(_ context.Context, f lock.Fence) error { fb = f; return nil }); err != nil {
		t.Fatalf("B after A released: %v", err)
	}
	if fb.Token() <= fa.Token() {
		t.Fatalf("B's token %d is not above A's %d", fb.Token(), fa.Token())
	}
}

func TestRunOnce_FailingOrPanickingJobReleasesTheLock(t *testing.T) {
	t.Parallel()
	gdb := testkit.DB(t, 5, migrations()...)
	rdb, prefix := testkit.Redis(t)
	r := newRunner(t, lock.Config{Addrs: []string{rdb.Options().Addr}, KeyPrefix: prefix, DB: gdb})
	boom := errors.New("boom")

	for _, tc := range []struct {
		name string
		fn   lock.Func
		want string
	}{
		{"error", func(context.Context, lock.Fence) error { return boom }, "boom"},
		{"panic", func(context.Context, lock.Fence) error { panic("kaput") }, "panicked: kaput"},
	} {
		err := r.RunOnce(context.Background(), "fails", tc.fn)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%s: RunOnce = %v, want an error containing %q", tc.name, err, tc.want)
		}
		if n := rdb.Exists(context.Background(), r.Key("fails")).Val(); n != 0 {
			t.Fatalf("%s: lock key still present after the job returned", tc.name)
		}
	}
}

func TestRunOnce_LostKeyCancelsTheJobWithErrLockLostAndIsNotRecreated(t *testing.T) {
	t.Parallel()
	gdb := testkit.DB(t, 5, migrations()...)
	rdb, prefix := testkit.Redis(t)
	reg := prometheus.NewRegistry()
	const expiry = time.Second
	r := newRunner(t, lock.Config{Addrs: []string{rdb.Options().Addr}, KeyPrefix: prefix, DB: gdb, Expiry: expiry, Registerer: reg})
	key := r.Key("lost")

	held := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- r.RunOnce(context.Background(), "lost", func(ctx context.Context, f lock.Fence) error {
			close(held)
			select {
			case <-ctx.Done():
				return context.Cause(ctx)
			case <-time.After(20 * time.Second):
				return errors.New("context never cancelled")
			}
		})
	}()
	recv(t, held, 10*time.Second, "the job to start")
	// The key disappears as it does when a replica without it is promoted.
	if err := rdb.Del(context.Background(), key).Err(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err := recv(t, done, 10*time.Second, "RunOnce to return")
	if !errors.Is(err, lock.ErrLockLost) {
		t.Fatalf("RunOnce = %v, want ErrLockLost", err)
	}
	// One extend interval plus that extend's deadline bound the detection.
	if waited := time.Since(start); waited > expiry {
		t.Errorf("job cancelled %s after the key vanished, want within the %s lease", waited, expiry)
	}
	if n := rdb.Exists(context.Background(), key).Val(); n != 0 {
		t.Fatal("the watchdog re-created a lost lock (SET NX on extend)")
	}
	if v := metricValue(t, reg, "onceonly_lock_lost_total", map[string]string{"job": "lost"}); v != 1 {
		t.Errorf("lost_total = %v, want 1", v)
	}
	if v := metricValue(t, reg, "onceonly_lock_job_runs_total", map[string]string{"job": "lost", "outcome": "lock_lost"}); v != 1 {
		t.Errorf("job_runs_total{outcome=lock_lost} = %v, want 1", v)
	}
}

func TestRunOnce_WatchdogKeepsTheLeaseForAJobLongerThanExpiry(t *testing.T) {
	t.Parallel()
	gdb := testkit.DB(t, 5, migrations()...)
	rdb, prefix := testkit.Redis(t)
	reg := prometheus.NewRegistry()
	const expiry = time.Second
	cfg := lock.Config{Addrs: []string{rdb.Options().Addr}, KeyPrefix: prefix, DB: gdb, Expiry: expiry, Registerer: reg}
	a, b := newRunner(t, cfg), newRunner(t, lock.Config{Addrs: cfg.Addrs, KeyPrefix: prefix, DB: gdb, Expiry: expiry})

	err := a.RunOnce(context.Background(), "long", func(ctx context.Context, f lock.Fence) error {
		end := time.Now().Add(3 * expiry)
		for time.Now().Before(end) {
			if err := b.RunOnce(context.Background(), "long", func(context.Context, lock.Fence) error {
				return errors.New("B ran while A's job was still running")
			}); !errors.Is(err, lock.ErrHeld) {
				return fmt.Errorf("B: %v, want ErrHeld", err)
			}
			if ctx.Err() != nil {
				return fmt.Errorf("A's context cancelled: %v", context.Cause(ctx))
			}
			time.Sleep(50 * time.Millisecond)
		}
		return write(ctx, gdb, f, "A")
	})
	if err != nil {
		t.Fatal(err)
	}
	if v := metricValue(t, reg, "onceonly_lock_extends_total", map[string]string{"job": "long", "outcome": "ok"}); v < 3 {
		t.Errorf("extends_total{ok} = %v over a job of 3 leases, want at least 3", v)
	}
}

func TestNew_RejectsClientsThatIgnoreContextDeadlines(t *testing.T) {
	t.Parallel()
	gdb := testkit.DB(t, 2, migrations()...)
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { c.Close() })
	if _, err := lock.New(lock.Config{Clients: []*redis.Client{c}, DB: gdb}); err == nil ||
		!strings.Contains(err.Error(), "ContextTimeoutEnabled") {
		t.Fatalf("New = %v, want an error about ContextTimeoutEnabled", err)
	}
	if _, err := lock.New(lock.Config{DB: gdb}); err == nil {
		t.Fatal("New without Redis: want an error")
	}

	// A caller's client that honours context deadlines is accepted and used.
	rdb, prefix := testkit.Redis(t)
	good := redis.NewClient(&redis.Options{Addr: rdb.Options().Addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { good.Close() })
	r := newRunner(t, lock.Config{Clients: []*redis.Client{good}, KeyPrefix: prefix, DB: gdb})
	if err := r.RunOnce(context.Background(), "clients", func(context.Context, lock.Fence) error { return nil }); err != nil {
		t.Fatalf("RunOnce with Config.Clients: %v", err)
	}
}

func TestRunOnce_DatabaseDownMeansNoTokenNoRunAndTheLockIsReleased(t *testing.T) {
	t.Parallel()
	rdb, prefix := testkit.Redis(t)
	dsn := testkit.DSN(t)
	gdb, err := db.Open(context.Background(), dsn, db.Options{MaxOpenConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Migrate(context.Background(), gdb, nil, migrations()...); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	r := newRunner(t, lock.Config{Addrs: []string{rdb.Options().Addr}, KeyPrefix: prefix, DB: gdb, Registerer: reg})
	_ = db.Close(gdb) // the database is gone

	ran := false
	err = r.RunOnce(context.Background(), "nodb", func(context.Context, lock.Fence) error { ran = true; return nil })
	if err == nil || ran || errors.Is(err, lock.ErrHeld) || errors.Is(err, lock.ErrUnavailable) {
		t.Fatalf("RunOnce without a database: ran %v, %v; want a token error and no run", ran, err)
	}
	if n := rdb.Exists(context.Background(), r.Key("nodb")).Val(); n != 0 {
		t.Fatal("the lock was kept after the token failed")
	}
	if v := metricValue(t, reg, "onceonly_lock_errors_total", map[string]string{"job": "nodb", "stage": "token"}); v != 1 {
		t.Errorf("errors_total{stage=token} = %v, want 1", v)
	}
}
