package ratelimit

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/onceonly/onceonly/internal/platform/config"
)

// Defaults (DESIGN.md, "Configuration").
const (
	DefaultUserRPS          = 20
	DefaultUserBurst        = 40
	DefaultInstanceRPS      = 2000
	DefaultInstances        = 1
	DefaultRedisTimeout     = 50 * time.Millisecond
	DefaultFailureThreshold = 3
	DefaultCoolDown         = time.Second
	DefaultFallbackUsers    = 10000
)

// maxRPS keeps the GCRA emission interval at one microsecond or more: the
// script counts in whole microseconds.
const maxRPS = 1e6

// Config configures a Limiter. A zero field takes its default; a negative or
// non-finite one is an error from New that names the field.
type Config struct {
	// UserRPS is each user's sustained rate across the whole fleet
	// (RATE_LIMIT_USER_RPS, default 20).
	UserRPS float64
	// UserBurst is how many requests a user who was idle may make at once
	// (RATE_LIMIT_USER_BURST, default 40).
	UserBurst int
	// InstanceRPS caps what this instance admits in total, before Redis is
	// asked (RATE_LIMIT_INSTANCE_RPS, default 2000).
	InstanceRPS float64
	// InstanceBurst is the instance bucket's size (default one second's worth
	// of InstanceRPS).
	InstanceBurst int
	// Instances is how many instances share a user's quota while Redis is down:
	// each then allows UserRPS/Instances and UserBurst/Instances (at least 1)
	// per user (RATE_LIMIT_INSTANCES, default 1). Set it to the real count: too
	// low over-admits, too high under-admits.
	Instances int
	// KeyPrefix goes in front of every Redis key ("<prefix>rl:<user>").
	KeyPrefix string
	// RedisTimeout bounds one Redis call (default 50 ms). A call that takes
	// longer counts as a failure and the request is decided locally.
	RedisTimeout time.Duration
	// FailureThreshold is how many consecutive Redis failures open the breaker
	// (default 3).
	FailureThreshold int
	// CoolDown is how long the open breaker keeps requests off Redis before one
	// probe is let through (default 1 s).
	CoolDown time.Duration
	// FallbackUsers bounds the users the local fallback remembers (default
	// 10,000); the least recently seen is forgotten first.
	FallbackUsers int
	// Now is the clock of the local parts (instance bucket, fallback buckets,
	// breaker); nil means time.Now. The Redis tier uses the Redis server's clock.
	Now func() time.Time
	// Registerer receives the limiter's metrics; nil registers none.
	Registerer prometheus.Registerer
}

// ConfigFromEnv reads the RATE_LIMIT_* variables (DESIGN.md). Malformed values
// are recorded in e (see config.Env.Err); the rest of the fields stay zero,
// which New turns into defaults.
func ConfigFromEnv(e *config.Env) Config {
	return Config{
		UserRPS:     e.Float("RATE_LIMIT_USER_RPS", DefaultUserRPS),
		UserBurst:   e.Int("RATE_LIMIT_USER_BURST", DefaultUserBurst, 1, math.MaxInt32),
		InstanceRPS: e.Float("RATE_LIMIT_INSTANCE_RPS", DefaultInstanceRPS),
		Instances:   e.Int("RATE_LIMIT_INSTANCES", DefaultInstances, 1, 100000),
	}
}

// withDefaults returns c with every zero field set to its default, after
// checking that no field is out of range.
func (c Config) withDefaults() (Config, error) {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("ratelimit: Config.%s: %s", field, fmt.Sprintf(format, args...)))
	}
	rps := func(field string, v *float64, def float64) {
		switch {
		case *v == 0:
			*v = def
		case math.IsNaN(*v) || *v < 0 || *v > maxRPS:
			bad(field, "want a rate in (0, %g] per second, got %v", maxRPS, *v)
		}
	}
	count := func(field string, v *int, def int) {
		if *v == 0 {
			*v = def
		} else if *v < 0 {
			bad(field, "want a positive count, got %d", *v)
		}
	}
	dur := func(field string, v *time.Duration, def time.Duration) {
		if *v == 0 {
			*v = def
		} else if *v < 0 {
			bad(field, "want a positive duration, got %v", *v)
		}
	}
	rps("UserRPS", &c.UserRPS, DefaultUserRPS)
	count("UserBurst", &c.UserBurst, DefaultUserBurst)
	rps("InstanceRPS", &c.InstanceRPS, DefaultInstanceRPS)
	count("InstanceBurst", &c.InstanceBurst, int(math.Ceil(c.InstanceRPS)))
	count("Instances", &c.Instances, DefaultInstances)
	dur("RedisTimeout", &c.RedisTimeout, DefaultRedisTimeout)
	count("FailureThreshold", &c.FailureThreshold, DefaultFailureThreshold)
	dur("CoolDown", &c.CoolDown, DefaultCoolDown)
	count("FallbackUsers", &c.FallbackUsers, DefaultFallbackUsers)
	if c.Now == nil {
		c.Now = time.Now
	}
	return c, errors.Join(errs...)
}

// shareRPS and shareBurst are one instance's part of a user's quota while
// Redis is down: Instances of them add up to the fleet-wide limit.
func (c Config) shareRPS() float64 { return c.UserRPS / float64(c.Instances) }

func (c Config) shareBurst() int { return max(1, c.UserBurst/c.Instances) }
