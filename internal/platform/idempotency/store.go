package idempotency

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/onceonly/onceonly/internal/platform/apperr"
)

// ErrLeaseLost is returned by Finish and Release when the lease id no longer
// holds the token: the lease ran out and another attempt claimed it, the
// token was released or finished by someone else, or the key expired or was
// lost. The caller's own work is not undone by it (see doc.go).
var ErrLeaseLost = errors.New("idempotency: lease lost")

// maxUserLen bounds the user id that becomes part of a key.
const maxUserLen = 256

// Token is a freshly issued submit token.
type Token struct {
	// Value is the token: 26 characters of base32 (A–Z, 2–7), 130 random bits.
	Value string
	// ExpiresAt is when Redis forgets the token, on the Redis server's clock.
	ExpiresAt time.Time
}

// Outcome is the result of a Claim. The zero value is not an outcome: Claim
// returns it only together with an error.
type Outcome int

const (
	_ Outcome = iota
	// Invalid: unknown, expired, malformed or another user's token. The
	// caller must not insert; it looks the token up in the database (scoped
	// to the user), because Redis may have lost a finished token.
	Invalid
	// Claimed: this attempt holds the lease (Claim.LeaseID) and may insert.
	Claimed
	// InUse: another attempt holds an unexpired lease (409), whatever its
	// body; the answer about the body comes once that attempt is done.
	InUse
	// Done: finished with the same body hash; replay Claim.OrderID.
	Done
	// Reused: finished with a different body hash (422).
	Reused
)

var outcomeNames = [...]string{"none", "invalid", "claimed", "in_use", "done", "reused"}

func (o Outcome) String() string {
	if o < 0 || int(o) >= len(outcomeNames) {
		return fmt.Sprintf("Outcome(%d)", int(o))
	}
	return outcomeNames[o]
}

// Claim is the result of Store.Claim.
type Claim struct {
	Outcome Outcome
	// LeaseID proves the claim to Finish and Release (Claimed only).
	LeaseID string
	// Reclaimed: Claimed after an earlier attempt's lease ran out. That
	// attempt may still be running or may have committed; the unique index
	// on orders.submit_token decides which insert wins.
	Reclaimed bool
	// OrderID and BodyHash are those the finished attempt recorded (Done and
	// Reused only).
	OrderID  string
	BodyHash string
}

// Store issues and claims submit tokens in Redis. It is safe for concurrent
// use. Every method returns a Redis failure as an *apperr.Error with code
// dependency_unavailable (the cause wrapped): the caller fails closed with
// 503 and never reads a failure as an outcome.
type Store struct {
	rdb redis.Scripter
	cfg Config
	m   *counters
}

// New returns a Store on rdb (a single Redis primary; see the scripts). Zero
// fields of cfg take their defaults; the result must pass Validate. Metrics
// are registered on reg; nil registers none.
func New(rdb redis.Scripter, cfg Config, reg prometheus.Registerer) (*Store, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m, err := newCounters(reg)
	if err != nil {
		return nil, err
	}
	return &Store{rdb: rdb, cfg: cfg, m: m}, nil
}

func (s *Store) tokenKey(token string) string { return s.cfg.KeyPrefix + "tok:" + token }
func (s *Store) indexPrefix() string          { return s.cfg.KeyPrefix + "user:" }
func (s *Store) indexKey(user string) string  { return s.indexPrefix() + user }

// Issue creates a token for user, valid for Config.TTL. At most
// Config.MaxUnused unused tokens per user: beyond, an *apperr.Error with code
// too_many_tokens. Check and add are one script, so concurrent calls cannot
// overshoot the cap.
func (s *Store) Issue(ctx context.Context, user string) (Token, error) {
	if err := checkUser(user); err != nil {
		return Token{}, err
	}
	// 26 base32 characters carry 130 random bits: unguessable, URL-safe, and
	// short enough for a header.
	value := rand.Text()
	res, err := issueScript.Run(ctx, s.rdb, []string{s.tokenKey(value), s.indexKey(user)},
		user, s.cfg.TTL.Milliseconds(), s.cfg.MaxUnused, value).Slice()
	if err != nil {
		return Token{}, s.redisErr("issue", err)
	}
	switch tag(res) {
	case "issued":
		if len(res) < 2 {
			return Token{}, fmt.Errorf("idempotency: issue: unexpected reply %v", res)
		}
		// A string, not a Lua number: see the note on %d in scripts.go.
		exp, err := strconv.ParseInt(fmt.Sprint(res[1]), 10, 64)
		if err != nil {
			return Token{}, fmt.Errorf("idempotency: issue: unexpected reply %v", res)
		}
		s.m.issued.Inc()
		return Token{Value: value, ExpiresAt: time.UnixMilli(exp).UTC()}, nil
	case "too_many":
		s.m.refused.Inc()
		return Token{}, apperr.New(apperr.TooManyTokens,
			"at most %d unused submit tokens per user; use one or wait until one expires", s.cfg.MaxUnused)
	default:
		// "collision" needs two equal 130-bit random values: a broken random
		// source, not bad luck. Refuse rather than hand out a token twice.
		return Token{}, fmt.Errorf("idempotency: issue: unexpected reply %v", res)
	}
}

// Claim tries to take token for one submit attempt by user with the given
// body hash (see BodyHash). The outcome is one of Invalid, Claimed, InUse,
// Done or Reused; on a Redis failure it is zero and err is set.
func (s *Store) Claim(ctx context.Context, user, token, bodyHash string) (Claim, error) {
	if err := checkUser(user); err != nil {
		return Claim{}, err
	}
	if bodyHash == "" || len(bodyHash) > 128 {
		return Claim{}, errors.New("idempotency: claim: body hash must be 1–128 bytes")
	}
	// A malformed token cannot have been issued (nor stored on an order);
	// refusing it here keeps client-chosen bytes out of the key space.
	if !wellFormed(token) {
		s.m.claims.WithLabelValues("invalid").Inc()
		return Claim{Outcome: Invalid}, nil
	}
	lease := rand.Text()
	res, err := claimScript.Run(ctx, s.rdb, []string{s.tokenKey(token), s.indexKey(user)},
		user, lease, bodyHash, s.cfg.Lease.Milliseconds(), token).Slice()
	if err != nil {
		return Claim{}, s.redisErr("claim", err)
	}
	var c Claim
	switch tag(res) {
	case "invalid":
		c.Outcome = Invalid
	case "in_use":
		c.Outcome = InUse
	case "claimed":
		c = Claim{Outcome: Claimed, LeaseID: lease, Reclaimed: len(res) > 1 && res[1] == int64(1)}
	case "done":
		if len(res) < 3 {
			return Claim{}, fmt.Errorf("idempotency: claim: unexpected reply %v", res)
		}
		c.OrderID, _ = res[1].(string)
		c.BodyHash, _ = res[2].(string)
		// Compared here rather than in Lua: a done token never changes again,
		// so nothing can slip in between the script and this line.
		c.Outcome = Reused
		if c.BodyHash == bodyHash {
			c.Outcome = Done
		}
	default:
		return Claim{}, fmt.Errorf("idempotency: claim: unexpected reply %v", res)
	}
	label := c.Outcome.String()
	if c.Reclaimed {
		label = "reclaimed"
	}
	s.m.claims.WithLabelValues(label).Inc()
	return c, nil
}

// Finish records that the claim leaseID of token created orderID. It returns
// ErrLeaseLost if leaseID no longer holds the token (a stale attempt must not
// overwrite a newer one's result). Repeating a successful Finish with the same
// arguments returns nil, so a Finish whose reply was lost can be retried.
func (s *Store) Finish(ctx context.Context, token, leaseID, orderID string) error {
	if orderID == "" {
		return errors.New("idempotency: finish: empty order id")
	}
	if !wellFormed(token) {
		return ErrLeaseLost
	}
	res, err := finishScript.Run(ctx, s.rdb, []string{s.tokenKey(token)}, leaseID, orderID).Text()
	if err != nil {
		return s.redisErr("finish", err)
	}
	return s.leaseResult("finish", res, "done")
}

// Release hands token back (state issued) after an attempt that will not
// create an order, e.g. a transient insert failure, so the client can retry
// with the same key at once instead of waiting out the lease. It returns
// ErrLeaseLost if leaseID no longer holds the token.
func (s *Store) Release(ctx context.Context, token, leaseID string) error {
	if !wellFormed(token) {
		return ErrLeaseLost
	}
	res, err := releaseScript.Run(ctx, s.rdb, []string{s.tokenKey(token)}, leaseID, s.indexPrefix(), token).Text()
	if err != nil {
		return s.redisErr("release", err)
	}
	return s.leaseResult("release", res, "released")
}

func (s *Store) leaseResult(op, res, ok string) error {
	counter := s.m.finishes
	if op == "release" {
		counter = s.m.releases
	}
	switch res {
	case ok:
		counter.WithLabelValues(ok).Inc()
		return nil
	case "lost":
		counter.WithLabelValues("lease_lost").Inc()
		return ErrLeaseLost
	default:
		return fmt.Errorf("idempotency: %s: unexpected reply %q", op, res)
	}
}

// redisErr wraps a Redis failure (network, timeout, server error, cancelled
// context) as dependency_unavailable, so the caller answers 503.
func (s *Store) redisErr(op string, err error) error {
	s.m.redisErrors.WithLabelValues(op).Inc()
	return apperr.Wrap(fmt.Errorf("idempotency: %s: %w", op, err),
		apperr.DependencyUnavailable, "submit tokens are unavailable; try again later")
}

func tag(res []any) string {
	if len(res) == 0 {
		return ""
	}
	s, _ := res[0].(string)
	return s
}

func checkUser(user string) error {
	if user == "" || len(user) > maxUserLen {
		return fmt.Errorf("idempotency: user id must be 1–%d bytes", maxUserLen)
	}
	return nil
}

// wellFormed accepts URL-safe tokens of a sane length. It is looser than what
// Issue produces, so a future token format still reaches Redis.
func wellFormed(token string) bool {
	if len(token) < 16 || len(token) > 64 {
		return false
	}
	for i := 0; i < len(token); i++ {
		c := token[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}
