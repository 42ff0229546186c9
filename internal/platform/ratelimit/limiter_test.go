package ratelimit

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/onceonly/onceonly/internal/platform/testkit"
)

// noInstanceCap keeps the instance tier out of tests about the user tier.
const noInstanceCap = 1e6

// patient is the RedisTimeout of tests about the Redis tier: under -race on
// two busy cores a call can exceed 50 ms, and a fallback decision would blur
// what they measure. The timeout itself has its own test.
const patient = 5 * time.Second

func TestAllow_BurstOverLimitIsDeniedWithRetryAfter(t *testing.T) {
	t.Parallel()
	rdb, prefix := testkit.Redis(t)
	ctx := context.Background()
	// Server TIME, as in production: the burst is spent in milliseconds and a
	// unit comes back only after 1/UserRPS = 10 s, so timing cannot flake.
	l, _ := newLimiter(t, rdb, Config{UserRPS: 0.1, UserBurst: 5, InstanceRPS: noInstanceCap, KeyPrefix: prefix, RedisTimeout: patient})

	for i := range 5 {
		d := l.Allow(ctx, "alice")
		if !d.Allowed || d.Tier != TierUser || d.Remaining != 4-i {
			t.Fatalf("request %d: %+v, want allowed by %q with %d remaining", i+1, d, TierUser, 4-i)
		}
		if d.RetryAfterSeconds() != 0 {
			t.Fatalf("request %d: allowed with RetryAfterSeconds %d", i+1, d.RetryAfterSeconds())
		}
	}
	d := l.Allow(ctx, "alice")
	if d.Allowed || d.Tier != TierUser {
		t.Fatalf("request 6: %+v, want denied by %q", d, TierUser)
	}
	if d.RetryAfter < 9*time.Second || d.RetryAfter > 10*time.Second {
		t.Fatalf("RetryAfter = %v, want just under 10 s (one emission interval)", d.RetryAfter)
	}
	if got := d.RetryAfterSeconds(); got != 10 {
		t.Fatalf("RetryAfterSeconds = %d, want 10 (rounded up)", got)
	}
	if d := l.Allow(ctx, "bob"); !d.Allowed {
		t.Fatalf("another user: %+v, want allowed (limits are per user)", d)
	}

	// The key is where the contract says and vanishes once the bucket would
	// be full again (5 units × 10 s), so idle users cost no memory.
	ttl, err := rdb.PTTL(ctx, prefix+"rl:alice").Result()
	if err != nil || ttl <= 40*time.Second || ttl > 50*time.Second {
		t.Fatalf("PTTL %s = %v, %v; want in (40 s, 50 s]", prefix+"rl:alice", ttl, err)
	}
}

func TestAllow_DeniedRetryAfterIsAtLeastOneSecondAsAHeader(t *testing.T) {
	t.Parallel()
	rdb, prefix := testkit.Redis(t)
	l, _ := newLimiter(t, rdb, Config{UserRPS: 20, UserBurst: 2, InstanceRPS: noInstanceCap, KeyPrefix: prefix, RedisTimeout: patient})
	clock := newFakeClock()
	l.redis.clock = clock.Now
	for range 2 {
		l.Allow(context.Background(), "u")
	}
	d := l.Allow(context.Background(), "u")
	if d.Allowed || d.RetryAfter != 50*time.Millisecond || d.RetryAfterSeconds() != 1 {
		t.Fatalf("got %+v (header %d s), want denied, RetryAfter 50ms, header 1 s", d, d.RetryAfterSeconds())
	}
}

func TestAllow_AdmitsRateTimesWindowPlusBurst(t *testing.T) {
	t.Parallel()
	rdb, prefix := testkit.Redis(t)
	const rps, burst = 20, 40
	clock := newFakeClock()
	l, _ := newLimiter(t, rdb, Config{UserRPS: rps, UserBurst: burst, InstanceRPS: noInstanceCap,
		KeyPrefix: prefix, RedisTimeout: patient, Now: clock.Now})
	// The script runs on the test's clock here, so 5 s pass in a fraction of
	// that: one request every 5 ms, four times the allowed rate.
	l.redis.clock = clock.Now

	const step, window = 5 * time.Millisecond, 5 * time.Second
	admitted := 0
	for elapsed := time.Duration(0); elapsed < window; elapsed += step {
		d := l.Allow(context.Background(), "u")
		if d.Tier != TierUser {
			t.Fatalf("at %v: decided by %q, want %q", elapsed, d.Tier, TierUser)
		}
		if d.Allowed {
			admitted++
		}
		// Never ahead of the bucket at any moment, not only at the end.
		if limit := burst + int(rps*elapsed.Seconds()) + 1; admitted > limit {
			t.Fatalf("at %v: %d admitted, more than burst + rate × elapsed = %d", elapsed, admitted, limit)
		}
		clock.Advance(step)
	}
	want := burst + int(rps*window.Seconds())
	if admitted < want-1 || admitted > want+1 {
		t.Fatalf("admitted %d over %v, want %d ± 1 (burst %d + %d/s × %v)", admitted, window, want, burst, rps, window)
	}
}

func TestAllow_InstanceTierShedsBeforeRedisIsCalled(t *testing.T) {
	t.Parallel()
	rdb, prefix := testkit.Redis(t)
	h := &callCounter{}
	rdb.AddHook(h)
	clock := newFakeClock()
	l, _ := newLimiter(t, rdb, Config{UserRPS: 1000, UserBurst: 1000, InstanceRPS: 10, InstanceBurst: 10,
		KeyPrefix: prefix, RedisTimeout: patient, Now: clock.Now})

	for i := range 15 {
		d := l.Allow(context.Background(), "user-"+string(rune('a'+i)))
		switch {
		case i < 10 && (!d.Allowed || d.Tier != TierUser):
			t.Fatalf("request %d: %+v, want allowed by Redis", i+1, d)
		case i >= 10 && (d.Allowed || d.Tier != TierInstance || d.RetryAfterSeconds() != 1):
			t.Fatalf("request %d: %+v, want denied by the instance tier with Retry-After 1", i+1, d)
		}
	}
	if got := h.evalsha.Load(); got != 10 {
		t.Fatalf("%d Redis calls, want 10: a request shed by the instance tier must not reach Redis", got)
	}
	if got := testutil.ToFloat64(l.metrics.limited[TierInstance]); got != 5 {
		t.Fatalf("limited_total{tier=instance} = %v, want 5", got)
	}
}

// TestAllow_ConcurrentCallsNeverAdmitMoreThanTheLimit hammers one user from
// 50 goroutines: a read-then-write limiter admits more than the burst here.
func TestAllow_ConcurrentCallsNeverAdmitMoreThanTheLimit(t *testing.T) {
	t.Parallel()
	const goroutines, perG = 50, 20
	hammer := func(l *Limiter) (admitted int64, tiers map[string]int) {
		var n atomic.Int64
		var mu sync.Mutex
		tiers = map[string]int{}
		var wg sync.WaitGroup
		for range goroutines {
			wg.Go(func() {
				for range perG {
					d := l.Allow(context.Background(), "hot")
					if d.Allowed {
						n.Add(1)
					}
					mu.Lock()
					tiers[d.Tier]++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		return n.Load(), tiers
	}
	base := Config{UserRPS: 2, UserBurst: 25, InstanceRPS: noInstanceCap, RedisTimeout: patient}

	t.Run("redis, frozen clock: exactly the burst", func(t *testing.T) {
		t.Parallel()
		rdb, prefix := testkit.Redis(t)
		c := base
		c.KeyPrefix = prefix
		l, _ := newLimiter(t, rdb, c)
		clock := newFakeClock()
		l.redis.clock = clock.Now
		if got, tiers := hammer(l); got != 25 || tiers[TierUser] != goroutines*perG {
			t.Fatalf("admitted %d (tiers %v), want exactly 25, all by %q", got, tiers, TierUser)
		}
	})
	t.Run("redis, server clock: burst plus rate × elapsed", func(t *testing.T) {
		t.Parallel()
		rdb, prefix := testkit.Redis(t)
		c := base
		c.KeyPrefix = prefix
		l, _ := newLimiter(t, rdb, c)
		start := time.Now()
		got, tiers := hammer(l)
		limit := 25 + int64(2*time.Since(start).Seconds()) + 1
		if got < 25 || got > limit || tiers[TierUser] != goroutines*perG {
			t.Fatalf("admitted %d (tiers %v), want in [25, %d], all by %q", got, tiers, limit, TierUser)
		}
	})
	t.Run("fallback, frozen clock: exactly the share of the burst", func(t *testing.T) {
		t.Parallel()
		rdb, _ := countedClient(t, closedAddr(t))
		c := base
		c.Instances, c.RedisTimeout, c.CoolDown = 5, 50*time.Millisecond, time.Hour
		clock := newFakeClock()
		c.Now = clock.Now
		l, _ := newLimiter(t, rdb, c)
		if got, tiers := hammer(l); got != 5 || tiers[TierFallback] != goroutines*perG {
			t.Fatalf("admitted %d (tiers %v), want exactly 25/5 = 5, all by %q", got, tiers, TierFallback)
		}
	})
}

func TestAllow_LongUserIDsAreHashedIntoABoundedKey(t *testing.T) {
	t.Parallel()
	rdb, prefix := testkit.Redis(t)
	l, _ := newLimiter(t, rdb, Config{UserRPS: 0.1, UserBurst: 1, InstanceRPS: noInstanceCap, KeyPrefix: prefix, RedisTimeout: patient})
	long := strings.Repeat("x", 10_000)
	if d := l.Allow(context.Background(), long); !d.Allowed {
		t.Fatalf("first request: %+v", d)
	}
	if d := l.Allow(context.Background(), long); d.Allowed {
		t.Fatalf("second request: %+v, want denied: a hashed id is still one user", d)
	}
	keys, err := rdb.Keys(context.Background(), prefix+"rl:*").Result()
	if err != nil || len(keys) != 1 || len(keys[0]) > len(prefix)+3+maxUserLen {
		t.Fatalf("keys %v, %v: want one key of at most %d bytes after the prefix", keys, err, maxUserLen+3)
	}
}
