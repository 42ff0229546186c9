package idempotency

import (
	"errors"
	"fmt"
	"time"

	"github.com/onceonly/onceonly/internal/platform/config"
)

// Defaults of Config (DESIGN.md, "Configuration").
const (
	DefaultTTL       = 30 * time.Minute
	DefaultLease     = 30 * time.Second
	DefaultMaxUnused = 100
	DefaultKeyPrefix = "onceonly:idem:"
)

// minDuration is the smallest TTL or lease accepted: the scripts work in
// whole milliseconds of the Redis clock, and anything shorter would round to
// zero (a lease that is expired the moment it is taken).
const minDuration = 10 * time.Millisecond

// Config configures a Store. A zero field takes its default (see New).
type Config struct {
	// TTL is a token's lifetime from Issue (ORDER_TOKEN_TTL). It is never
	// extended: a claimed or finished token disappears from Redis at the same
	// moment an unused one would, after which the database answers replays.
	TTL time.Duration
	// Lease is how long a claim keeps other attempts out (ORDER_SUBMIT_LEASE).
	// Keep the caller's own deadline for the insert below it, so that a lease
	// rarely runs out under a live attempt.
	Lease time.Duration
	// MaxUnused caps the issued, unclaimed, unexpired tokens of one user, so
	// one client cannot fill Redis with tokens it never uses.
	MaxUnused int
	// KeyPrefix is put in front of every key the Store writes.
	KeyPrefix string
}

// ConfigFromEnv reads ORDER_TOKEN_TTL and ORDER_SUBMIT_LEASE. Problems are
// recorded in e (e.Err names the variable); the result is not yet validated,
// New does that.
func ConfigFromEnv(e *config.Env) Config {
	return Config{
		TTL:       e.Duration("ORDER_TOKEN_TTL", DefaultTTL),
		Lease:     e.Duration("ORDER_SUBMIT_LEASE", DefaultLease),
		MaxUnused: DefaultMaxUnused,
		KeyPrefix: DefaultKeyPrefix,
	}
}

// withDefaults fills zero fields.
func (c Config) withDefaults() Config {
	if c.TTL == 0 {
		c.TTL = DefaultTTL
	}
	if c.Lease == 0 {
		c.Lease = DefaultLease
	}
	if c.MaxUnused == 0 {
		c.MaxUnused = DefaultMaxUnused
	}
	if c.KeyPrefix == "" {
		c.KeyPrefix = DefaultKeyPrefix
	}
	return c
}

// Validate reports every problem of c (after defaults), naming the
// environment variable where there is one.
func (c Config) Validate() error {
	var errs []error
	if c.TTL < minDuration {
		errs = append(errs, fmt.Errorf("idempotency: TTL (ORDER_TOKEN_TTL) must be at least %v, got %v", minDuration, c.TTL))
	}
	if c.Lease < minDuration {
		errs = append(errs, fmt.Errorf("idempotency: Lease (ORDER_SUBMIT_LEASE) must be at least %v, got %v", minDuration, c.Lease))
	}
	// A lease that outlives the token is meaningless: the key (and with it the
	// lease) disappears first, and Finish could never record the result.
	if c.Lease >= c.TTL {
		errs = append(errs, fmt.Errorf("idempotency: Lease (ORDER_SUBMIT_LEASE, %v) must be shorter than TTL (ORDER_TOKEN_TTL, %v)", c.Lease, c.TTL))
	}
	if c.MaxUnused < 1 || c.MaxUnused > 100_000 {
		errs = append(errs, fmt.Errorf("idempotency: MaxUnused must be in [1, 100000], got %d", c.MaxUnused))
	}
	return errors.Join(errs...)
}
