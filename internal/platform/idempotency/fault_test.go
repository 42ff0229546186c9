package idempotency

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/onceonly/onceonly/internal/platform/apperr"
	"github.com/onceonly/onceonly/internal/platform/testkit"
)

// Every call on an unreachable Redis must be an error the caller answers
// with 503, never an outcome: "invalid" would send a retry of a finished
// submit to a 400, and "claimed" would let it insert.
func TestStore_RedisUnreachableFailsClosed(t *testing.T) {
	t.Parallel()
	t.Run("killed redis-server", func(t *testing.T) {
		t.Parallel()
		p := testkit.RedisServer(t)
		s, err := New(p.Client(), Config{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		tok := mustIssue(t, s, "u1")
		finished := mustIssue(t, s, "u1")
		c := mustClaim(t, s, "u1", finished.Value, BodyHash("A"), Claimed)
		if err := s.Finish(ctxT(t), finished.Value, c.LeaseID, "order-1"); err != nil {
			t.Fatal(err)
		}
		leased := mustIssue(t, s, "u1")
		lc := mustClaim(t, s, "u1", leased.Value, BodyHash("A"), Claimed)
		p.Kill()
		assertFailsClosed(t, s, tok.Value, finished.Value, leased.Value, lc.LeaseID)
	})
	t.Run("closed port", func(t *testing.T) {
		t.Parallel()
		rdb := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", testkit.FreePort(t)),
			DialTimeout: time.Second, MaxRetries: -1})
		t.Cleanup(func() { rdb.Close() })
		s, err := New(rdb, Config{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		const tok = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
		assertFailsClosed(t, s, tok, tok, tok, "LEASEABCDEFGHIJKLMNOPQRSTU")
	})
}

func assertFailsClosed(t *testing.T, s *Store, unused, finished, leased, leaseID string) {
	t.Helper()
	unavailable := func(op string, err error) {
		t.Helper()
		if err == nil {
			t.Fatalf("%s on an unreachable Redis succeeded", op)
		}
		if errors.Is(err, ErrLeaseLost) || apperr.CodeOf(err) != apperr.DependencyUnavailable {
			t.Fatalf("%s: %v (code %s), want dependency_unavailable", op, err, apperr.CodeOf(err))
		}
	}
	_, err := s.Issue(ctxT(t), "u1")
	unavailable("Issue", err)
	for _, tok := range []string{unused, finished, leased} {
		c, err := s.Claim(ctxT(t), "u1", tok, BodyHash("A"))
		unavailable("Claim", err)
		if c.Outcome != 0 {
			t.Fatalf("Claim on an unreachable Redis returned outcome %v with its error", c.Outcome)
		}
	}
	unavailable("Finish", s.Finish(ctxT(t), leased, leaseID, "order-2"))
	unavailable("Release", s.Release(ctxT(t), leased, leaseID))
	if got := testutil.ToFloat64(s.m.redisErrors.WithLabelValues("claim")); got != 3 {
		t.Errorf("redis_errors_total{op=claim} = %v, want 3", got)
	}
}
