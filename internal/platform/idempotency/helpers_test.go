package idempotency

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/onceonly/onceonly/internal/platform/testkit"
)

// env is one test's Store on its own key prefix (real Redis on
// TEST_REDIS_ADDR, miniredis otherwise) with its own metrics registry.
type env struct {
	s   *Store
	rdb *redis.Client
	reg *prometheus.Registry
}

func newEnv(t *testing.T, cfg Config) env {
	t.Helper()
	rdb, prefix := testkit.Redis(t)
	cfg.KeyPrefix = prefix + "idem:"
	reg := prometheus.NewRegistry()
	s, err := New(rdb, cfg, reg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return env{s: s, rdb: rdb, reg: reg}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustIssue(t *testing.T, s *Store, user string) Token {
	t.Helper()
	tok, err := s.Issue(ctxT(t), user)
	if err != nil {
		t.Fatalf("Issue(%q): %v", user, err)
	}
	return tok
}

func mustClaim(t *testing.T, s *Store, user, token, hash string, want Outcome) Claim {
	t.Helper()
	c, err := s.Claim(ctxT(t), user, token, hash)
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	if c.Outcome != want {
		t.Fatalf("Claim outcome = %v, want %v (%+v)", c.Outcome, want, c)
	}
	return c
}

// race runs n calls of f at once: every goroutine is started and waiting
// before the barrier opens, so the calls really overlap.
func race(n int, f func(i int)) {
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	ready.Add(n)
	done.Add(n)
	for i := range n {
		go func() {
			defer done.Done()
			ready.Done()
			<-start
			f(i)
		}()
	}
	ready.Wait()
	close(start)
	done.Wait()
}
