package ratelimit

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/onceonly/onceonly/internal/platform/testkit"
)

// BenchmarkAllow and BenchmarkRedisPing sit side by side so one run gives the
// ratio "limiter decision : one raw Redis round trip" on the same server.
// Every decision here is an admission (the write path of the script), spread
// over 1,000 users.
func BenchmarkAllow(b *testing.B) {
	rdb, prefix := testkit.Redis(b)
	l, _ := newLimiter(b, rdb, Config{UserRPS: maxRPS, UserBurst: 1 << 20, InstanceRPS: maxRPS,
		InstanceBurst: 1 << 30, KeyPrefix: prefix, RedisTimeout: time.Second})
	users := benchUsers()
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if d := l.Allow(ctx, users[i%len(users)]); d.Tier != TierUser {
			b.Fatalf("decided by %q, want %q", d.Tier, TierUser)
		}
	}
}

func BenchmarkRedisPing(b *testing.B) {
	rdb, _ := testkit.Redis(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := rdb.Ping(ctx).Err(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRedisScript is the GCRA script alone (EVALSHA, no goroutine, no
// breaker): Allow minus this is the limiter's own overhead.
func BenchmarkRedisScript(b *testing.B) {
	rdb, prefix := testkit.Redis(b)
	l, _ := newLimiter(b, rdb, Config{UserRPS: maxRPS, UserBurst: 1 << 20, KeyPrefix: prefix})
	users := benchUsers()
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := l.redis.call(ctx, users[i%len(users)]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAllowFallback is a decision with the breaker open: no Redis call.
func BenchmarkAllowFallback(b *testing.B) {
	rdb, _ := countedClient(b, closedAddr(b))
	l, _ := newLimiter(b, rdb, Config{UserRPS: maxRPS, UserBurst: 1 << 20, InstanceRPS: maxRPS,
		InstanceBurst: 1 << 30, CoolDown: time.Hour})
	users := benchUsers()
	ctx := context.Background()
	for range DefaultFailureThreshold {
		l.Allow(ctx, "warm-up")
	}
	if s, _ := l.breaker.current(); s != open {
		b.Fatalf("breaker %v, want open", s)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if d := l.Allow(ctx, users[i%len(users)]); d.Tier != TierFallback {
			b.Fatalf("decided by %q, want %q", d.Tier, TierFallback)
		}
	}
}

func benchUsers() []string {
	users := make([]string, 1000)
	for i := range users {
		users[i] = "user-" + strconv.Itoa(i)
	}
	return users
}
