package idempotency

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/onceonly/onceonly/internal/platform/apperr"
)

func TestIssue_TokensAreRandomURLSafeAndExpireAfterTTL(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{})
	seen := map[string]bool{}
	for range 20 {
		before := time.Now()
		tok := mustIssue(t, e.s, "u1")
		if !wellFormed(tok.Value) || len(tok.Value) < 26 {
			t.Fatalf("token %q is not a URL-safe 26+ character token", tok.Value)
		}
		if seen[tok.Value] {
			t.Fatalf("token %q issued twice", tok.Value)
		}
		seen[tok.Value] = true
		// ExpiresAt is on the Redis clock; on one host it agrees with ours.
		if d := tok.ExpiresAt.Sub(before.Add(DefaultTTL)); d < -2*time.Second || d > 2*time.Second {
			t.Fatalf("ExpiresAt = %v, want about now + %v", tok.ExpiresAt, DefaultTTL)
		}
	}
	ttl, err := e.rdb.PTTL(ctxT(t), e.s.tokenKey(mustIssue(t, e.s, "u1").Value)).Result()
	if err != nil || ttl <= DefaultTTL-time.Minute || ttl > DefaultTTL {
		t.Fatalf("PTTL of a new token = %v, %v; want about %v", ttl, err, DefaultTTL)
	}
	if got := testutil.ToFloat64(e.s.m.issued); got != 21 {
		t.Errorf("tokens_issued_total = %v, want 21", got)
	}
}

func isTooMany(err error) bool { return apperr.CodeOf(err) == apperr.TooManyTokens }

func TestIssue_CapsUnusedTokensPerUserAndClaimingFreesASlot(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{})
	var first Token
	for i := range DefaultMaxUnused {
		tok := mustIssue(t, e.s, "u1")
		if i == 0 {
			first = tok
		}
	}
	if _, err := e.s.Issue(ctxT(t), "u1"); !isTooMany(err) {
		t.Fatalf("Issue #101 = %v, want too_many_tokens", err)
	}
	// The cap is per user.
	mustIssue(t, e.s, "u2")

	// A claimed token is no longer unused: one more may be issued, not two.
	mustClaim(t, e.s, "u1", first.Value, BodyHash("A"), Claimed)
	mustIssue(t, e.s, "u1")
	if _, err := e.s.Issue(ctxT(t), "u1"); !isTooMany(err) {
		t.Fatalf("Issue after refilling the freed slot = %v, want too_many_tokens", err)
	}
	if got := testutil.ToFloat64(e.s.m.refused); got != 2 {
		t.Errorf("tokens_refused_total = %v, want 2", got)
	}
}

func TestIssue_ConcurrentIssuesForOneUserNeverExceedTheCap(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{})
	var ok, tooMany, other atomic.Int64
	race(200, func(int) {
		_, err := e.s.Issue(ctxT(t), "u1")
		switch {
		case err == nil:
			ok.Add(1)
		case isTooMany(err):
			tooMany.Add(1)
		default:
			t.Errorf("Issue: %v", err)
			other.Add(1)
		}
	})
	if ok.Load() != 100 || tooMany.Load() != 100 || other.Load() != 0 {
		t.Fatalf("issued=%d too_many=%d other=%d, want 100/100/0", ok.Load(), tooMany.Load(), other.Load())
	}
	if n, err := e.rdb.ZCard(ctxT(t), e.s.indexKey("u1")).Result(); err != nil || n != 100 {
		t.Fatalf("unused index holds %d (%v), want 100", n, err)
	}
}

func TestIssue_ExpiredTokensLeaveTheCapWithoutASweeper(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{TTL: 600 * time.Millisecond, Lease: 100 * time.Millisecond, MaxUnused: 3})
	for range 3 {
		mustIssue(t, e.s, "u1")
	}
	if _, err := e.s.Issue(ctxT(t), "u1"); !isTooMany(err) {
		t.Fatalf("Issue #4 = %v, want too_many_tokens", err)
	}
	time.Sleep(700 * time.Millisecond)
	for range 3 {
		mustIssue(t, e.s, "u1")
	}
	// The index key itself expires with its newest member, so idle users
	// leave nothing behind.
	ttl, err := e.rdb.PTTL(ctxT(t), e.s.indexKey("u1")).Result()
	if err != nil || ttl <= 0 || ttl > 600*time.Millisecond {
		t.Fatalf("PTTL of the index = %v, %v; want in (0, 600ms]", ttl, err)
	}
}

func TestRelease_ReleasedTokenCountsAsUnusedAgain(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{MaxUnused: 2})
	a := mustIssue(t, e.s, "u1")
	mustIssue(t, e.s, "u1")
	c := mustClaim(t, e.s, "u1", a.Value, BodyHash("A"), Claimed)
	if err := e.s.Release(ctxT(t), a.Value, c.LeaseID); err != nil {
		t.Fatalf("Release: %v", err)
	}
	// Otherwise claim-and-release would mint unused tokens past the cap.
	if _, err := e.s.Issue(ctxT(t), "u1"); !isTooMany(err) {
		t.Fatalf("Issue after Release = %v, want too_many_tokens", err)
	}
}

func TestIssue_RejectsEmptyUser(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{})
	if _, err := e.s.Issue(ctxT(t), ""); err == nil || errors.Is(err, ErrLeaseLost) {
		t.Fatalf("Issue(\"\") = %v, want an error", err)
	}
	if _, err := e.s.Claim(ctxT(t), "", "ABCDEFGHIJKLMNOPQRSTUVWXYZ", "h"); err == nil {
		t.Fatal("Claim with an empty user succeeded")
	}
}
