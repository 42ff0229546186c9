package httpapi_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/onceonly/onceonly/internal/order"
	"github.com/onceonly/onceonly/internal/order/app"
	"github.com/onceonly/onceonly/internal/platform/idempotency"
	"github.com/onceonly/onceonly/internal/platform/testkit"
)

// Redis is the fast path, not the record: once it has forgotten a finished
// token (restart without persistence, failover, eviction, TTL), the order
// row — UNIQUE submit_token plus body_hash — still answers.
func TestSubmit_RedisLosesTokenStateDatabaseStillAnswers(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	key := e.token("alice")
	created := decodeOrder(t, e.submit("alice", key, body1))

	n, err := e.rdb.Del(context.Background(), e.prefix+"idem:tok:"+key).Result()
	if err != nil || n != 1 {
		t.Fatalf("delete the token's key: %d, %v (key layout changed?)", n, err)
	}
	r := e.submit("alice", key, body1)
	if r.status != http.StatusOK || r.header.Get("Idempotent-Replayed") != "true" || decodeOrder(t, r).ID != created.ID {
		t.Fatalf("replay after Redis lost the token: %v", r)
	}
	mustProblem(t, e.submit("alice", key, body2), http.StatusUnprocessableEntity, "idempotency_key_reused")
	mustProblem(t, e.submit("bob", key, body1), http.StatusBadRequest, "idempotency_key_invalid")
	if rows := e.countOrders(""); rows != 1 {
		t.Fatalf("%d order rows, want 1", rows)
	}
}

// A process that claimed a key and died never finishes or releases it: the
// key answers 409 until its lease ends, then a retry claims it and creates
// the one order.
func TestSubmit_CrashAfterClaimHoldsTheKeyUntilTheLeaseEnds(t *testing.T) {
	t.Parallel()
	const lease = 1500 * time.Millisecond
	e := newEnv(t, options{cfg: func(c *app.Config) { c.SubmitLease = lease }})
	key := e.token("alice")
	in := order.NewOrder{Currency: "CNY", Items: []order.Item{{SKU: "apple", Quantity: 2, PriceCents: 350}}}
	// The dead process: it claimed with this body, then nothing.
	before := time.Now()
	c, err := e.tokens().Claim(context.Background(), "alice", key, in.BodyHash())
	if err != nil || c.Outcome != idempotency.Claimed {
		t.Fatalf("claim: %+v, %v", c, err)
	}
	claimed := time.Now()

	r := e.submitThroughLease("alice", key, body1, before, claimed, lease, 0, lease/2)
	if r.status != http.StatusCreated {
		t.Fatalf("retry after the lease: %v", r)
	}
	if again := e.submit("alice", key, body1); again.status != http.StatusOK {
		t.Fatalf("replay: %v", again)
	}
	if rows := e.countOrders(""); rows != 1 {
		t.Fatalf("%d order rows, want 1", rows)
	}
}

// leaseMargin is how long before a lease's end a test stops asserting 409:
// it covers the Redis clock's millisecond steps and the moment between an
// answer arriving and the test reading the clock.
const leaseMargin = 250 * time.Millisecond

// submitThroughLease follows a key claimed by another attempt (stalled or
// dead) at some moment between claimedAfter and claimedBy, under lease. At
// each probe offset from claimedAfter it submits and expects 409
// idempotency_key_in_use — asserted only if the answer came back before
// claimedAfter + lease − leaseMargin: only then is the lease certainly still
// running, however slow the machine. A later probe may find the lease ended
// and claim the key itself; its answer is then the one after the lease.
// Otherwise it submits once more 100 ms after claimedBy + lease, when the
// lease has certainly ended, and returns that answer.
func (e *env) submitThroughLease(user, key, body string, claimedAfter, claimedBy time.Time, lease time.Duration, probes ...time.Duration) resp {
	e.t.Helper()
	for _, at := range probes {
		time.Sleep(time.Until(claimedAfter.Add(at)))
		r := e.submit(user, key, body)
		elapsed := time.Since(claimedAfter)
		if elapsed < lease-leaseMargin {
			mustProblem(e.t, r, http.StatusConflict, "idempotency_key_in_use")
			continue
		}
		e.t.Logf("probe answered %v after the claim (lease %v, margin %v): the lease may have ended, 409 not asserted; got %d",
			elapsed.Round(time.Millisecond), lease, leaseMargin, r.status)
		if r.status != http.StatusConflict {
			return r
		}
	}
	time.Sleep(time.Until(claimedBy.Add(lease + 100*time.Millisecond)))
	return e.submit(user, key, body)
}

// hangingStore holds the first Create until released, ignoring its
// context: a process stalled (GC pause, paging) with its INSERT already on
// the wire. Every other call passes straight through.
type hangingStore struct {
	order.Store
	once    sync.Once
	entered chan struct{}
	release chan struct{}
}

func (s *hangingStore) Create(ctx context.Context, o *order.Order) error {
	first := false
	s.once.Do(func() { first = true })
	if first {
		close(s.entered)
		<-s.release
		return s.Store.Create(context.WithoutCancel(ctx), o)
	}
	return s.Store.Create(ctx, o)
}

// An attempt slower than its lease lets a retry in beside it: both reach
// the database, the UNIQUE index lets one insert through, and both answer
// with that one order.
func TestSubmit_AttemptSlowerThanTheLeaseStillCreatesOneOrder(t *testing.T) {
	t.Parallel()
	const lease = time.Second
	hs := &hangingStore{entered: make(chan struct{}), release: make(chan struct{})}
	e := newEnv(t, options{
		cfg:  func(c *app.Config) { c.SubmitLease = lease },
		wrap: func(s order.Store) order.Store { hs.Store = s; return hs },
	})
	key := e.token("alice")
	slow := make(chan resp, 1)
	sent := time.Now() // the slow attempt claims after this…
	go func() { slow <- e.submit("alice", key, body1) }()
	<-hs.entered
	claimed := time.Now() // …and before this

	// 409 while its lease surely runs (the check is skipped if this machine
	// was too slow to ask in time), then, after it, a retry that gets in.
	retry := e.submitThroughLease("alice", key, body1, sent, claimed, lease, 0)
	if retry.status != http.StatusCreated {
		t.Fatalf("retry after the lease ran out: %v", retry)
	}
	close(hs.release)
	late := <-slow
	if late.status != http.StatusOK || decodeOrder(t, late).ID != decodeOrder(t, retry).ID {
		t.Fatalf("the stalled attempt answered %v, want 200 with the retry's order", late)
	}
	if rows := e.countOrders(""); rows != 1 {
		t.Fatalf("%d order rows, want 1", rows)
	}
}

// failingStore fails Create while fail is set, as a database that is down.
type failingStore struct {
	order.Store
	fail atomic.Bool
}

func (s *failingStore) Create(ctx context.Context, o *order.Order) error {
	if s.fail.Load() {
		return errors.New("dial tcp 127.0.0.1:3306: connect: connection refused")
	}
	return s.Store.Create(ctx, o)
}

// A failed insert answers 503 and hands the key back: the client's retry
// is served at once instead of meeting 409 for a whole lease.
func TestSubmit_DatabaseFailureReleasesTheKeyForAnImmediateRetry(t *testing.T) {
	t.Parallel()
	fs := &failingStore{}
	e := newEnv(t, options{wrap: func(s order.Store) order.Store { fs.Store = s; return fs }})
	key := e.token("alice")
	fs.fail.Store(true)
	p := mustProblem(t, e.submit("alice", key, body1), http.StatusServiceUnavailable, "dependency_unavailable")
	if p.Detail == "" || containsAny(p.Detail, "3306", "tcp") {
		t.Errorf("detail %q leaks the cause", p.Detail)
	}
	fs.fail.Store(false)
	if r := e.submit("alice", key, body1); r.status != http.StatusCreated {
		t.Fatalf("retry right after the failure: %v", r)
	}
}

// serviceRedisClient is a client configured exactly as the service's own:
// the options are copied from service.Open in
// internal/platform/service/service.go (keep them in step), so the dead-Redis
// tests meet the same timeouts, retries and context handling as production.
func serviceRedisClient(t *testing.T, addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{
		Addr:                  addr,
		DialTimeout:           time.Second,
		ReadTimeout:           time.Second,
		WriteTimeout:          time.Second,
		ContextTimeoutEnabled: true,
		MaxRetries:            1,
		DialerRetries:         1,
		PoolSize:              64,
	})
	t.Cleanup(func() { c.Close() })
	return c
}

// Without Redis nobody can tell whether another attempt holds a key: every
// submit fails closed with 503 — a fresh key, a finished key's replay — and
// nothing is inserted. When Redis returns, a new token works.
func TestSubmit_RedisUnreachableFailsClosedThenRecovers(t *testing.T) {
	t.Parallel()
	srv := testkit.RedisServer(t)
	e := newEnv(t, options{redis: serviceRedisClient(t, srv.Addr)})
	done := e.token("alice")
	created := decodeOrder(t, e.submit("alice", done, body1))
	unused := e.token("alice")

	srv.Kill()
	start := time.Now()
	for _, key := range []string{unused, done} {
		mustProblem(t, e.submit("alice", key, body1), http.StatusServiceUnavailable, "dependency_unavailable")
	}
	mustProblem(t, e.do(http.MethodPost, "/v1/orders/tokens", "alice", ""), http.StatusServiceUnavailable, "dependency_unavailable")
	t.Logf("three requests on a dead Redis answered 503 in %v", time.Since(start).Round(time.Millisecond))
	if rows := e.countOrders(""); rows != 1 {
		t.Fatalf("%d order rows while Redis was down, want only the earlier 1", rows)
	}
	// Reads do not need Redis (the limiter falls back to its local share).
	if r := e.do(http.MethodGet, "/v1/orders/"+created.ID, "alice", ""); r.status != http.StatusOK {
		t.Fatalf("GET while Redis is down: %v", r)
	}

	srv.RestartSamePort()
	var key string
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := e.do(http.MethodPost, "/v1/orders/tokens", "alice", "")
		if r.status == http.StatusCreated {
			var tok struct {
				Token     string `json:"token"`
				ExpiresAt string `json:"expires_at"`
			}
			mustJSON(t, r.body, &tok)
			key = tok.Token
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no token 10 s after Redis returned: %v", r)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if r := e.submit("alice", key, body2); r.status != http.StatusCreated {
		t.Fatalf("submit after Redis returned: %v", r)
	}
	// The restarted Redis has no state; the old finished key still replays
	// from the database.
	if r := e.submit("alice", done, body1); r.status != http.StatusOK || decodeOrder(t, r).ID != created.ID {
		t.Fatalf("old key after the restart: %v", r)
	}
	if rows := e.countOrders(""); rows != 2 {
		t.Fatalf("%d order rows, want 2", rows)
	}
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
