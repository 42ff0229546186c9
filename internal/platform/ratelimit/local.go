package ratelimit

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// localTier is the per-user limit an instance applies on its own while Redis
// cannot be asked: each user's bucket holds this instance's share of the
// fleet-wide quota, so Instances instances together admit what Redis would.
//
// Users live in a bounded LRU so a flood of distinct ids cannot grow memory.
// A user pushed out and seen again starts with a full bucket; that needs
// FallbackUsers other users in between, each of whom is limited as well.
type localTier struct {
	rate  rate.Limit
	burst int

	mu    sync.Mutex // guards users; each *rate.Limiter has its own lock
	users *lru[*rate.Limiter]
}

func newLocalTier(c Config) *localTier {
	return &localTier{
		rate:  rate.Limit(c.shareRPS()),
		burst: c.shareBurst(),
		users: newLRU[*rate.Limiter](c.FallbackUsers),
	}
}

func (f *localTier) allow(now time.Time, user string) Decision {
	f.mu.Lock()
	lim := f.users.getOrAdd(user, func() *rate.Limiter { return rate.NewLimiter(f.rate, f.burst) })
	f.mu.Unlock()
	return take(lim, now, TierFallback)
}

// take spends one token of lim at now, on the caller's clock: rate.Limiter
// accepts the time as an argument, which is what lets tests drive it.
func take(lim *rate.Limiter, now time.Time, tier string) Decision {
	if lim.AllowN(now, 1) {
		return Decision{Allowed: true, Tier: tier, Remaining: max(0, int(lim.TokensAt(now)))}
	}
	return denial(lim, now, tier)
}

// denial is the decision after lim refused at now. RetryAfter is the time
// until one whole token is back; a refused AllowN spent nothing, so this only
// reads (a concurrent caller may have moved it a little, harmless for a hint).
func denial(lim *rate.Limiter, now time.Time, tier string) Decision {
	missing := 1 - lim.TokensAt(now)
	wait := time.Duration(missing / float64(lim.Limit()) * float64(time.Second))
	return Decision{Allowed: false, Tier: tier, RetryAfter: max(wait, time.Millisecond)}
}
