package lock_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/onceonly/onceonly/internal/platform/lock"
	"github.com/onceonly/onceonly/internal/platform/testkit"
)

// A Redis primary acknowledges A's SET and dies before shipping it to its
// replica (replication is asynchronous); the replica is promoted and the
// instances' address moves to it. The test models exactly that state: the
// replica replicates through a proxy, which is stalled just before A acquires,
// so the primary acknowledges A's key while the replica provably lacks it;
// then the primary is killed (SIGKILL), the replica promoted with REPLICAOF NO
// ONE and the instances' proxy (a virtual IP, or Sentinel's answer) pointed at
// it. B then acquires the "free" lock while A still believes it holds it.
func TestFailover_LostKeyLetsTwoHoldButTheFenceRefusesTheStaleWrite(t *testing.T) {
	t.Parallel()
	const job = "failover"
	ctx := context.Background()
	gdb := testkit.DB(t, 10, migrations()...)

	// Diskless full sync waits 5 s by default for more replicas to join.
	primary := testkit.RedisServer(t, "--repl-diskless-sync-delay", "0")
	replLink := newProxy(t, primary.Addr)
	replica := testkit.RedisServer(t, "--replicaof", "127.0.0.1", strconv.Itoa(replLink.Port()))
	pc, rc := primary.Client(), replica.Client()
	if err := pc.Set(ctx, "probe", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the replica to sync", func() bool { return rc.Get(ctx, "probe").Val() == "1" })

	vip := newProxy(t, primary.Addr)
	// A long lease: A's watchdog does not run during the test, so A acts on
	// a lock it still believes valid, which is what a failover produces.
	cfg := lock.Config{Addrs: []string{vip.Addr()}, Expiry: 30 * time.Second, DB: gdb}
	cfgA, cfgB := cfg, cfg
	cfgA.Instance, cfgB.Instance = "A", "B"
	regA := prometheus.NewRegistry()
	cfgA.Registerer = regA
	a, b := newRunner(t, cfgA), newRunner(t, cfgB)
	key := a.Key(job)

	replLink.Stall() // from here on, the primary's writes do not reach the replica

	type attempt struct {
		ctxErr, err error
	}
	held, writeNow, wrote := make(chan lock.Fence, 1), make(chan struct{}), make(chan attempt, 1)
	aDone := make(chan error, 1)
	go func() {
		aDone <- a.RunOnce(ctx, job, func(ctx context.Context, f lock.Fence) error {
			held <- f
			select {
			case <-writeNow:
			case <-time.After(30 * time.Second):
			}
			ctxErr := ctx.Err()
			err := write(ctx, gdb, f, "A")
			wrote <- attempt{ctxErr, err}
			return err
		})
	}()
	fa := recv(t, held, 10*time.Second, "A to acquire")
	if pc.Exists(ctx, key).Val() != 1 || rc.Exists(ctx, key).Val() != 0 {
		t.Fatal("want A's key on the primary and not on the replica")
	}

	primary.Kill()
	if err := rc.Do(ctx, "REPLICAOF", "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	vip.SetTarget(replica.Addr)

	var fb lock.Fence
	waitFor(t, 10*time.Second, "B to acquire on the new primary", func() bool {
		err := b.RunOnce(ctx, job, func(ctx context.Context, f lock.Fence) error {
			fb = f
			return write(ctx, gdb, f, "B")
		})
		switch {
		case errors.Is(err, lock.ErrUnavailable):
			return false // connections to the old primary are still being dropped
		case err != nil:
			t.Fatalf("B: %v", err)
		}
		return true
	})
	if fb.Token() <= fa.Token() {
		t.Fatalf("B's token %d is not above A's %d", fb.Token(), fa.Token())
	}

	close(writeNow)
	got := recv(t, wrote, 30*time.Second, "A's write")
	if got.ctxErr != nil {
		t.Fatalf("A's context was already cancelled (%v): the test wants A to believe it holds the lock", got.ctxErr)
	}
	if !errors.Is(got.err, lock.ErrFenced) {
		t.Fatalf("A's write after the failover: %v, want ErrFenced", got.err)
	}
	if err := recv(t, aDone, 10*time.Second, "A's run to end"); !errors.Is(err, lock.ErrFenced) {
		t.Fatalf("A's RunOnce = %v, want ErrFenced", err)
	}
	if na, nb := countWrites(t, gdb, job, "A"), countWrites(t, gdb, job, "B"); na != 0 || nb != 1 {
		t.Fatalf("writes accepted: A (stale) %d, B %d; want 0 and 1", na, nb)
	}
	if v := metricValue(t, regA, "onceonly_lock_fenced_writes_total", map[string]string{"job": job}); v != 1 {
		t.Errorf("A's fenced_writes_total = %v, want 1", v)
	}
	t.Logf("stale writes refused: 1, accepted: 0 (A token %d, B token %d)", fa.Token(), fb.Token())
}
