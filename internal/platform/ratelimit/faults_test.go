package ratelimit

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/onceonly/onceonly/internal/platform/testkit"
)

func TestAllow_RedisDownAdmitsTheInstanceShareWithinTenPercent(t *testing.T) {
	t.Parallel()
	rdb, h := countedClient(t, closedAddr(t))
	clock := newFakeClock()
	// Four instances share 20/s, burst 40: this one may admit 5/s, burst 10.
	l, _ := newLimiter(t, rdb, Config{UserRPS: 20, UserBurst: 40, Instances: 4, Now: clock.Now})
	const shareRPS, shareBurst = 5, 10
	const step, window = time.Millisecond, 10 * time.Second

	admitted := 0
	for elapsed := time.Duration(0); elapsed < window; elapsed += step {
		d := l.Allow(context.Background(), "u")
		if d.Tier != TierFallback {
			t.Fatalf("at %v: %+v, want decided by %q", elapsed, d, TierFallback)
		}
		if d.Allowed {
			admitted++
		} else if d.RetryAfterSeconds() < 1 {
			t.Fatalf("at %v: denied with Retry-After %d", elapsed, d.RetryAfterSeconds())
		}
		if limit := shareBurst + int(shareRPS*elapsed.Seconds()) + 1; admitted > limit {
			t.Fatalf("at %v: %d admitted, more than share burst + share rate × elapsed = %d", elapsed, admitted, limit)
		}
		if elapsed%time.Second == 0 && fallbackGauge(l) != 1 {
			t.Fatalf("at %v: fallback_active = %v, want 1 while Redis is down", elapsed, fallbackGauge(l))
		}
		clock.Advance(step)
	}
	want := shareBurst + shareRPS*int(window.Seconds()) // 60
	if admitted < want*9/10 || admitted > want*11/10 {
		t.Fatalf("admitted %d over %v with Redis down, want %d ± 10%%", admitted, window, want)
	}
	// 10,000 requests, yet Redis saw only the failures that opened the
	// breaker and one probe per cool-down.
	if calls := h.evalsha.Load(); calls > 3+10+1 {
		t.Fatalf("%d Redis calls in %v, want at most 3 + one probe per second", calls, window)
	}
	if got := testutil.ToFloat64(l.metrics.redisErrors[false]); got < 3 {
		t.Fatalf("redis_errors_total{kind=error} = %v, want ≥ 3", got)
	}
}

func TestAllow_OpenBreakerMakesNoRedisCallsProbesOnceAndSwitchesBack(t *testing.T) {
	t.Parallel()
	srv := testkit.RedisServer(t)
	rdb, h := countedClient(t, srv.Addr)
	clock := newFakeClock()
	l, _ := newLimiter(t, rdb, Config{UserRPS: 1000, UserBurst: 1000, Instances: 2,
		FailureThreshold: 3, CoolDown: time.Second, RedisTimeout: patient, Now: clock.Now})
	ctx := context.Background()
	expect := func(what, tier string, calls int64, gauge float64) {
		t.Helper()
		d := l.Allow(ctx, "u")
		if !d.Allowed || d.Tier != tier {
			t.Fatalf("%s: %+v, want allowed by %q", what, d, tier)
		}
		if got := h.evalsha.Load(); got != calls {
			t.Fatalf("%s: %d limiter calls to Redis so far, want %d: %v", what, got, calls, h.commands())
		}
		if got := fallbackGauge(l); got != gauge {
			t.Fatalf("%s: fallback_active = %v, want %v", what, got, gauge)
		}
	}

	expect("Redis up", TierUser, 1, 0)
	srv.Kill()
	for i := range 3 {
		expect("failure before the breaker opens", TierFallback, int64(2+i), 1)
	}
	if s, _ := l.breaker.current(); s != open {
		t.Fatalf("breaker %v after 3 consecutive failures, want open", s)
	}
	dials, cmds := h.dials.Load(), h.calls.Load()
	for range 99 { // 990 ms: still inside the cool-down
		clock.Advance(10 * time.Millisecond)
		expect("breaker open", TierFallback, 4, 1)
	}
	if h.dials.Load() != dials || h.calls.Load() != cmds {
		t.Fatalf("%d dials and %d commands while the breaker was open, want none",
			h.dials.Load()-dials, h.calls.Load()-cmds)
	}

	clock.Advance(10 * time.Millisecond)
	expect("cool-down over: the probe", TierFallback, 5, 1)
	for range 10 {
		expect("failed probe re-opened the breaker", TierFallback, 5, 1)
	}

	restartRedis(t, srv)
	clock.Advance(time.Second)
	// The restarted server has an empty script cache: EVALSHA gets NOSCRIPT
	// and the script is sent once with EVAL, within the same Allow.
	expect("Redis back: the probe succeeds", TierUser, 6, 0)
	scripts := slices.DeleteFunc(h.commands(), func(c string) bool { return c != "evalsha" && c != "eval" })
	if !slices.Equal(scripts[len(scripts)-2:], []string{"evalsha", "eval"}) {
		t.Fatalf("script commands %v, want evalsha then eval last", scripts)
	}
	expect("breaker closed", TierUser, 7, 0)

	for to, want := range map[string]float64{"open": 2, "half_open": 2, "closed": 1} {
		if got := testutil.ToFloat64(l.metrics.transitions.WithLabelValues(to)); got != want {
			t.Errorf("breaker_transitions_total{to=%s} = %v, want %v", to, got, want)
		}
	}
}

func TestAllow_SlowRedisCostsAtMostTheTimeoutAndOneProbeAtATime(t *testing.T) {
	t.Parallel()
	// A Redis that accepts and never answers, and a client with go-redis
	// defaults: ContextTimeoutEnabled off, ReadTimeout in seconds.
	rdb := redis.NewClient(&redis.Options{Addr: blackHole(t), MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	h := &callCounter{}
	rdb.AddHook(h)
	clock := newFakeClock()
	const timeout = 200 * time.Millisecond
	l, _ := newLimiter(t, rdb, Config{RedisTimeout: timeout, Now: clock.Now})
	ctx := context.Background()

	for i := range 3 {
		start := time.Now()
		d := l.Allow(ctx, "u")
		if took := time.Since(start); took < timeout || took > timeout+time.Second {
			t.Fatalf("call %d took %v, want about RedisTimeout %v (not the client's ReadTimeout)", i+1, took, timeout)
		}
		if !d.Allowed || d.Tier != TierFallback {
			t.Fatalf("call %d: %+v, want allowed by %q", i+1, d, TierFallback)
		}
	}
	if got := testutil.ToFloat64(l.metrics.redisErrors[true]); got != 3 {
		t.Fatalf("redis_errors_total{kind=timeout} = %v, want 3", got)
	}

	clock.Advance(DefaultCoolDown)
	before := h.evalsha.Load()
	probe := make(chan Decision, 1)
	go func() { probe <- l.Allow(ctx, "u") }()
	for deadline := time.Now().Add(5 * time.Second); h.evalsha.Load() == before; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the probe never reached Redis")
		}
	}
	// While the probe hangs (or after it failed and re-opened the breaker),
	// every other request stays off Redis and is decided at once.
	for range 20 {
		start := time.Now()
		if d := l.Allow(ctx, "v"); d.Tier != TierFallback || time.Since(start) >= timeout {
			t.Fatalf("%+v after %v, want decided locally without waiting", d, time.Since(start))
		}
	}
	if d := <-probe; d.Tier != TierFallback {
		t.Fatalf("probe: %+v, want decided locally after its timeout", d)
	}
	if got := h.evalsha.Load() - before; got != 1 {
		t.Fatalf("%d Redis calls after the cool-down, want exactly 1 probe", got)
	}
	if s, _ := l.breaker.current(); s != open {
		t.Fatalf("breaker %v after a failed probe, want open", s)
	}
}

func TestAllow_CallerThatLeftIsNotCountedAsARedisFailure(t *testing.T) {
	t.Parallel()
	rdb, prefix := testkit.Redis(t)
	h := &callCounter{}
	rdb.AddHook(h)
	clock := newFakeClock()
	l, _ := newLimiter(t, rdb, Config{UserBurst: 2, KeyPrefix: prefix, FailureThreshold: 1, Now: clock.Now})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	admitted := 0
	for range 10 {
		if d := l.Allow(ctx, "u"); d.Tier != TierFallback {
			t.Fatalf("%+v, want decided locally (still limited) for a cancelled caller", d)
		} else if d.Allowed {
			admitted++
		}
	}
	if admitted != 2 {
		t.Fatalf("admitted %d of 10 for a cancelled caller, want the burst, 2", admitted)
	}
	if s, degraded := l.breaker.current(); s != closed || degraded || h.calls.Load() != 0 {
		t.Fatalf("breaker %v, degraded %v, %d Redis calls; want closed, healthy, no calls", s, degraded, h.calls.Load())
	}
}
