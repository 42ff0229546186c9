package idempotency

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestClaim_ConcurrentClaimsOfOneTokenYieldExactlyOneClaimed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{})
	tok := mustIssue(t, e.s, "u1")
	hash := BodyHash("body")

	var claimed, inUse, other atomic.Int64
	var firstErr atomic.Value
	race(1000, func(int) {
		c, err := e.s.Claim(ctxT(t), "u1", tok.Value, hash)
		switch {
		case err != nil:
			firstErr.CompareAndSwap(nil, err)
			other.Add(1)
		case c.Outcome == Claimed:
			claimed.Add(1)
		case c.Outcome == InUse:
			inUse.Add(1)
		default:
			other.Add(1)
		}
	})
	if claimed.Load() != 1 || inUse.Load() != 999 || other.Load() != 0 {
		t.Fatalf("claimed=%d in_use=%d other=%d (first error: %v), want 1/999/0",
			claimed.Load(), inUse.Load(), other.Load(), firstErr.Load())
	}
	if got := testutil.ToFloat64(e.s.m.claims.WithLabelValues("in_use")); got != 999 {
		t.Errorf("claims_total{outcome=in_use} = %v, want 999", got)
	}
}

func TestClaim_AfterFinishSameBodyReplaysOrderDifferentBodyIsReused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{})
	tok := mustIssue(t, e.s, "u1")
	hashA, hashB := BodyHash("A"), BodyHash("B")
	c := mustClaim(t, e.s, "u1", tok.Value, hashA, Claimed)
	if err := e.s.Finish(ctxT(t), tok.Value, c.LeaseID, "order-1"); err != nil {
		t.Fatalf("Finish: %v", err)
	}

	same := mustClaim(t, e.s, "u1", tok.Value, hashA, Done)
	if same.OrderID != "order-1" || same.BodyHash != hashA {
		t.Errorf("Done claim = %+v, want order-1 with hash A", same)
	}
	diff := mustClaim(t, e.s, "u1", tok.Value, hashB, Reused)
	if diff.OrderID != "order-1" || diff.BodyHash != hashA {
		t.Errorf("Reused claim = %+v, want order-1 with the stored hash A", diff)
	}
	// A finished token stays finished: it is never handed out again.
	mustClaim(t, e.s, "u1", tok.Value, hashA, Done)
	if got := testutil.ToFloat64(e.s.m.claims.WithLabelValues("reused")); got != 1 {
		t.Errorf("claims_total{outcome=reused} = %v, want 1", got)
	}
}

func TestClaim_WhileInFlightIsInUseWhateverTheBody(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{})
	tok := mustIssue(t, e.s, "u1")
	mustClaim(t, e.s, "u1", tok.Value, BodyHash("A"), Claimed)
	mustClaim(t, e.s, "u1", tok.Value, BodyHash("A"), InUse)
	mustClaim(t, e.s, "u1", tok.Value, BodyHash("B"), InUse)
}

func TestClaim_ExpiredLeaseIsReclaimedAndStaleFinishIsRefused(t *testing.T) {
	t.Parallel()
	// 400 ms: short enough to wait out, long enough that the InUse check right
	// after the claim does not race the lease on a loaded machine.
	e := newEnv(t, Config{TTL: 10 * time.Second, Lease: 400 * time.Millisecond})
	tok := mustIssue(t, e.s, "u1")
	hash := BodyHash("A")
	claimedAt := time.Now()
	first := mustClaim(t, e.s, "u1", tok.Value, hash, Claimed)
	if first.Reclaimed {
		t.Error("first claim reported Reclaimed")
	}
	// Checked only while the lease surely runs: a stalled test runner must
	// not turn a correct reclaim into a failure.
	if c, err := e.s.Claim(ctxT(t), "u1", tok.Value, hash); err != nil {
		t.Fatal(err)
	} else if c.Outcome != InUse && time.Since(claimedAt) < 300*time.Millisecond {
		t.Fatalf("claim inside the lease = %v, want InUse", c.Outcome)
	}

	time.Sleep(550 * time.Millisecond) // past the lease, no Finish
	second := mustClaim(t, e.s, "u1", tok.Value, hash, Claimed)
	if !second.Reclaimed || second.LeaseID == first.LeaseID {
		t.Fatalf("second claim = %+v, want Reclaimed with a new lease id (first %q)", second, first.LeaseID)
	}
	if err := e.s.Finish(ctxT(t), tok.Value, first.LeaseID, "order-stale"); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("Finish with the expired, re-claimed lease = %v, want ErrLeaseLost", err)
	}
	if err := e.s.Release(ctxT(t), tok.Value, first.LeaseID); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("Release with the expired, re-claimed lease = %v, want ErrLeaseLost", err)
	}
	if err := e.s.Finish(ctxT(t), tok.Value, second.LeaseID, "order-2"); err != nil {
		t.Fatalf("Finish with the current lease: %v", err)
	}
	if c := mustClaim(t, e.s, "u1", tok.Value, hash, Done); c.OrderID != "order-2" {
		t.Fatalf("replay order = %q, want order-2 (the stale worker must not overwrite)", c.OrderID)
	}
	if got := testutil.ToFloat64(e.s.m.claims.WithLabelValues("reclaimed")); got != 1 {
		t.Errorf("claims_total{outcome=reclaimed} = %v, want 1", got)
	}
}

func TestClaim_ExpiredLeaseNotReclaimedStillFinishes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{TTL: 10 * time.Second, Lease: 50 * time.Millisecond})
	tok := mustIssue(t, e.s, "u1")
	c := mustClaim(t, e.s, "u1", tok.Value, BodyHash("A"), Claimed)
	time.Sleep(100 * time.Millisecond)
	// A slow attempt whose lease ran out but that nobody overtook still owns
	// the token: its order is the only one.
	if err := e.s.Finish(ctxT(t), tok.Value, c.LeaseID, "order-1"); err != nil {
		t.Fatalf("Finish after an unclaimed lease expiry: %v", err)
	}
	mustClaim(t, e.s, "u1", tok.Value, BodyHash("A"), Done)
}

func TestRelease_PutsTokenBackForTheSameKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{})
	tok := mustIssue(t, e.s, "u1")
	first := mustClaim(t, e.s, "u1", tok.Value, BodyHash("A"), Claimed)
	if err := e.s.Release(ctxT(t), tok.Value, first.LeaseID); err != nil {
		t.Fatalf("Release: %v", err)
	}
	// A retry of the released lease is refused: the lease is gone.
	if err := e.s.Release(ctxT(t), tok.Value, first.LeaseID); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("second Release = %v, want ErrLeaseLost", err)
	}
	if err := e.s.Finish(ctxT(t), tok.Value, first.LeaseID, "order-x"); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("Finish after Release = %v, want ErrLeaseLost", err)
	}
	// The client's retry may even carry a corrected body: nothing was created.
	again := mustClaim(t, e.s, "u1", tok.Value, BodyHash("B"), Claimed)
	if again.LeaseID == first.LeaseID || again.Reclaimed {
		t.Fatalf("claim after Release = %+v, want a fresh, non-reclaimed lease", again)
	}
	if err := e.s.Finish(ctxT(t), tok.Value, again.LeaseID, "order-1"); err != nil {
		t.Fatalf("Finish: %v", err)
	}
	mustClaim(t, e.s, "u1", tok.Value, BodyHash("B"), Done)
}

func TestFinish_OnlyTheCurrentLeaseFinishesAndRetriesAreIdempotent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{})
	tok := mustIssue(t, e.s, "u1")
	c := mustClaim(t, e.s, "u1", tok.Value, BodyHash("A"), Claimed)
	if err := e.s.Finish(ctxT(t), tok.Value, "not-the-lease", "order-x"); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("Finish with a wrong lease = %v, want ErrLeaseLost", err)
	}
	if err := e.s.Finish(ctxT(t), tok.Value, c.LeaseID, "order-1"); err != nil {
		t.Fatalf("Finish: %v", err)
	}
	// The first reply may have been lost on the network: a retry is fine...
	if err := e.s.Finish(ctxT(t), tok.Value, c.LeaseID, "order-1"); err != nil {
		t.Fatalf("repeated Finish: %v", err)
	}
	// ...but nothing rewrites the recorded order, and nothing un-finishes it.
	if err := e.s.Finish(ctxT(t), tok.Value, c.LeaseID, "order-2"); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("Finish with another order id = %v, want ErrLeaseLost", err)
	}
	if err := e.s.Release(ctxT(t), tok.Value, c.LeaseID); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("Release after Finish = %v, want ErrLeaseLost", err)
	}
	if got := mustClaim(t, e.s, "u1", tok.Value, BodyHash("A"), Done); got.OrderID != "order-1" {
		t.Fatalf("order = %q, want order-1", got.OrderID)
	}
	// Finishing keeps the token's own TTL: it is neither made permanent nor
	// cut short (the database answers replays once it is gone).
	ttl, err := e.rdb.PTTL(ctxT(t), e.s.tokenKey(tok.Value)).Result()
	if err != nil || ttl <= 0 || ttl > DefaultTTL {
		t.Fatalf("PTTL after Finish = %v, %v; want in (0, %v]", ttl, err, DefaultTTL)
	}
}

func TestClaim_InvalidForUnknownForeignOrMalformedToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{})
	unused := mustIssue(t, e.s, "owner")
	finished := mustIssue(t, e.s, "owner")
	c := mustClaim(t, e.s, "owner", finished.Value, BodyHash("A"), Claimed)
	if err := e.s.Finish(ctxT(t), finished.Value, c.LeaseID, "order-1"); err != nil {
		t.Fatal(err)
	}
	inFlight := mustIssue(t, e.s, "owner")
	mustClaim(t, e.s, "owner", inFlight.Value, BodyHash("A"), Claimed)

	cases := []struct{ name, token string }{
		{"unknown", "ABCDEFGHIJKLMNOPQRSTUVWXYZ"},
		{"another user's unused token", unused.Value},
		{"another user's in-flight token", inFlight.Value},
		{"another user's finished token", finished.Value},
		{"malformed", "../../etc/passwd"},
		{"empty", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mustClaim(t, e.s, "intruder", tc.token, BodyHash("A"), Invalid)
		})
	}
	// The intruder's attempts changed nothing for the owner.
	mustClaim(t, e.s, "owner", unused.Value, BodyHash("A"), Claimed)
	mustClaim(t, e.s, "owner", inFlight.Value, BodyHash("A"), InUse)
	mustClaim(t, e.s, "owner", finished.Value, BodyHash("A"), Done)
}

func TestClaim_ExpiredUnusedTokenIsInvalid(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{TTL: 300 * time.Millisecond, Lease: 100 * time.Millisecond})
	tok := mustIssue(t, e.s, "u1")
	time.Sleep(400 * time.Millisecond)
	mustClaim(t, e.s, "u1", tok.Value, BodyHash("A"), Invalid)
}
