package ratelimit

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/time/rate"
)

// Tiers, in the order a request meets them. Decision.Tier names the one that
// decided; they are also the values of the metrics' tier label.
const (
	// TierInstance is this instance's total cap; it only ever denies.
	TierInstance = "instance"
	// TierUser is the fleet-wide per-user limit kept in Redis.
	TierUser = "user"
	// TierFallback is this instance's share of the per-user limit, applied
	// locally while Redis fails or the breaker is open.
	TierFallback = "fallback"
)

// Decision is the answer for one request.
type Decision struct {
	// Allowed reports whether the request may proceed.
	Allowed bool
	// RetryAfter is, when denied, the time until the denying tier would admit
	// one more request (always > 0); zero when allowed. Use RetryAfterSeconds
	// for the Retry-After header.
	RetryAfter time.Duration
	// Tier is the tier that decided (TierInstance, TierUser, TierFallback).
	Tier string
	// Remaining is how many more requests the deciding tier would admit for
	// this user right now; 0 when denied.
	Remaining int
}

// RetryAfterSeconds is the Retry-After header value: RetryAfter rounded up to
// whole seconds and at least 1 when denied (rounding down, or a 0, would
// invite a retry that is denied again); 0 when allowed.
func (d Decision) RetryAfterSeconds() int {
	if d.Allowed {
		return 0
	}
	return max(1, int((d.RetryAfter+time.Second-1)/time.Second))
}

// Limiter decides whether a user's request may proceed: the instance bucket
// first (no Redis call when this instance is already over its cap), then the
// user's GCRA bucket in Redis, or this instance's share of it locally when
// Redis fails. It never admits a request without some limit having said yes.
// A Limiter is safe for concurrent use.
type Limiter struct {
	now      func() time.Time
	instance *rate.Limiter
	redis    *redisTier
	local    *localTier
	breaker  *breaker
	metrics  *limiterMetrics
}

// New returns a Limiter on rdb (see the package doc for the client options it
// wants). The error names every invalid Config field, or says why the metrics
// could not be registered (e.g. a second limiter on the same Registerer).
func New(rdb redis.Scripter, c Config) (*Limiter, error) {
	if rdb == nil {
		return nil, errors.New("ratelimit: nil Redis client")
	}
	c, err := c.withDefaults()
	if err != nil {
		return nil, err
	}
	m, err := newMetrics(c.Registerer)
	if err != nil {
		return nil, err
	}
	l := &Limiter{
		now:      c.Now,
		instance: rate.NewLimiter(rate.Limit(c.InstanceRPS), c.InstanceBurst),
		redis:    newRedisTier(rdb, c),
		local:    newLocalTier(c),
		metrics:  m,
	}
	l.breaker = &breaker{
		now:          c.Now,
		threshold:    c.FailureThreshold,
		coolDown:     c.CoolDown,
		onTransition: func(to breakerState) { m.transitions.WithLabelValues(to.String()).Inc() },
		onDegraded: func(d bool) {
			if d {
				m.fallback.Set(1)
			} else {
				m.fallback.Set(0)
			}
		},
	}
	return l, nil
}

// Allow decides one request of user (a non-empty, stable id; ids over 128
// bytes are hashed). ctx bounds the wait together with RedisTimeout; when ctx
// ends first the request is still decided, locally.
func (l *Limiter) Allow(ctx context.Context, user string) Decision {
	d := l.decide(ctx, userKey(user))
	l.metrics.record(d)
	return d
}

func (l *Limiter) decide(ctx context.Context, user string) Decision {
	// An overloaded instance sheds here, before it spends a Redis round trip.
	if now := l.now(); !l.instance.AllowN(now, 1) {
		return denial(l.instance, now, TierInstance)
	}
	// A caller that already left gets no Redis round trip spent on it.
	if ctx.Err() == nil {
		if call, probe := l.breaker.enter(); call {
			d, err := l.redis.allow(ctx, user)
			switch {
			case err == nil:
				l.breaker.leave(probe, success)
				return d
			case ctx.Err() != nil:
				// Our caller gave up; that is no evidence against Redis.
				l.breaker.leave(probe, abandoned)
			default:
				l.metrics.redisError(err)
				l.breaker.leave(probe, failure)
			}
		}
	}
	// Fail closed: without Redis the user still meets a limit, this
	// instance's share of theirs, never an open door.
	return l.local.allow(l.now(), user)
}

// FallbackActive reports whether per-user limits are currently decided
// locally (the last Redis call failed, or the breaker is not closed).
func (l *Limiter) FallbackActive() bool {
	_, degraded := l.breaker.current()
	return degraded
}
