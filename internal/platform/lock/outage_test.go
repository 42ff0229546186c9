package lock_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/onceonly/onceonly/internal/platform/lock"
	"github.com/onceonly/onceonly/internal/platform/testkit"
)

func TestRedisUnreachable_TicksAreSkippedAndCountedThenTheRunnerRecovers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cut  func(*tcpProxy)
	}{
		{"connections reset", (*tcpProxy).Refuse},
		{"network stalled", (*tcpProxy).Stall},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			const job = "outage"
			gdb := testkit.DB(t, 5, migrations()...)
			srv := testkit.RedisServer(t)
			path := newProxy(t, srv.Addr)
			reg := prometheus.NewRegistry()
			r := newRunner(t, lock.Config{Addrs: []string{path.Addr()}, Expiry: time.Second, DB: gdb, Registerer: reg})

			var runs atomic.Int64
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				defer close(done)
				_ = r.Run(ctx, job, 10*time.Millisecond, func(context.Context, lock.Fence) error {
					runs.Add(1)
					return nil
				})
			}()
			defer func() { cancel(); <-done }()
			acquireErrors := func() float64 {
				return metricValue(t, reg, "onceonly_lock_errors_total", map[string]string{"job": job, "stage": "acquire"})
			}

			waitFor(t, 10*time.Second, "the job to run", func() bool { return runs.Load() >= 3 })
			tc.cut(path)
			// Ticks run one after another, so once a failed tick is counted no
			// earlier run is still in flight.
			waitFor(t, 10*time.Second, "a failed tick", func() bool { return acquireErrors() >= 1 })
			before, errsBefore := runs.Load(), acquireErrors()
			start := time.Now()
			waitFor(t, 10*time.Second, "more failed ticks", func() bool { return acquireErrors() >= errsBefore+4 })
			if got := runs.Load(); got != before {
				t.Fatalf("the job ran %d times while Redis was unreachable", got-before)
			}
			// Each failed tick is bounded by the Redis timeout (200ms at this
			// expiry), not by the lease or a TCP timeout.
			if per := time.Since(start) / 4; per > time.Second {
				t.Errorf("a failed tick took %s on average", per)
			}

			path.Forward()
			waitFor(t, 15*time.Second, "the runner to recover", func() bool { return runs.Load() > before })
		})
	}
}

func TestRedlock_AcquiresWithOneOfThreeNodesDownButNotWithTwo(t *testing.T) {
	t.Parallel()
	const job = "redlock"
	ctx := context.Background()
	gdb := testkit.DB(t, 5, migrations()...)
	nodes := []*testkit.RedisProc{testkit.RedisServer(t), testkit.RedisServer(t), testkit.RedisServer(t)}
	addrs := []string{nodes[0].Addr, nodes[1].Addr, nodes[2].Addr}
	r := newRunner(t, lock.Config{Addrs: addrs, Expiry: 2 * time.Second, DB: gdb, Instance: "r"})
	other := newRunner(t, lock.Config{Addrs: addrs, Expiry: 2 * time.Second, DB: gdb, Instance: "other"})
	key := r.Key(job)

	run := func(r *lock.Runner, inside func() error) (bool, error) {
		ran := false
		err := r.RunOnce(ctx, job, func(ctx context.Context, f lock.Fence) error {
			ran = true
			if inside != nil {
				return inside()
			}
			return write(ctx, gdb, f, "r")
		})
		return ran, err
	}

	if ran, err := run(r, nil); !ran || err != nil {
		t.Fatalf("3 of 3 nodes up: ran %v, %v", ran, err)
	}

	nodes[0].Kill()
	if ran, err := run(r, nil); !ran || err != nil {
		t.Fatalf("2 of 3 nodes up: ran %v, %v; want the lock", ran, err)
	}
	// The majority still excludes a second instance while one holds.
	if _, err := run(r, func() error {
		if ran, err := run(other, nil); ran || !errors.Is(err, lock.ErrHeld) {
			t.Errorf("second instance with 2 of 3 nodes up and the lock held: ran %v, %v; want ErrHeld", ran, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	nodes[1].Kill()
	ran, err := run(r, nil)
	if ran || !errors.Is(err, lock.ErrUnavailable) {
		t.Fatalf("1 of 3 nodes up: ran %v, %v; want ErrUnavailable", ran, err)
	}
	// The failed attempt released what it took on the surviving node.
	if n := nodes[2].Client().Exists(ctx, key).Val(); n != 0 {
		t.Fatal("the failed acquisition left its key on the surviving node")
	}
	if n := countWrites(t, gdb, job, "r"); n != 2 {
		t.Fatalf("%d writes, want 2 (the runs that held a majority)", n)
	}
}

func TestRedisStalledDuringAJob_ContextCancelledWithErrLockLostBeforeTheLeaseEnds(t *testing.T) {
	t.Parallel()
	const job, expiry = "stall", time.Second
	gdb := testkit.DB(t, 5, migrations()...)
	srv := testkit.RedisServer(t)
	path := newProxy(t, srv.Addr)
	reg := prometheus.NewRegistry()
	r := newRunner(t, lock.Config{Addrs: []string{path.Addr()}, Expiry: expiry, DB: gdb, Registerer: reg})

	stalled := make(chan time.Time, 1)
	err := r.RunOnce(context.Background(), job, func(ctx context.Context, f lock.Fence) error {
		path.Stall() // Redis stops answering: extends hang instead of failing
		stalled <- time.Now()
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(10 * time.Second):
			return errors.New("context never cancelled")
		}
	})
	// The last extend before the stall renewed the lease for at most one
	// expiry, so the job must hear of the loss within that.
	if waited := time.Since(<-stalled); waited >= expiry {
		t.Errorf("job cancelled %s after Redis stalled, want before the %s lease ends", waited, expiry)
	}
	if !errors.Is(err, lock.ErrLockLost) {
		t.Fatalf("RunOnce = %v, want ErrLockLost", err)
	}
	if v := metricValue(t, reg, "onceonly_lock_extends_total", map[string]string{"job": job, "outcome": "failed"}); v != 1 {
		t.Errorf("extends_total{failed} = %v, want 1", v)
	}
}
