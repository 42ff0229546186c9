package order

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/onceonly/onceonly/internal/platform/apperr"
	"github.com/onceonly/onceonly/internal/platform/idempotency"
)

// maxTokenLen is the longest key that can have been stored on an order
// (orders.submit_token).
const maxTokenLen = 64

// plausibleKey reports whether key could be on an order row: a token
// Issue could have made (URL-safe ASCII, at most maxTokenLen). Anything else
// is answered invalid without a query, so client bytes never meet the ASCII
// column in a comparison the database might refuse.
func plausibleKey(key string) bool {
	if key == "" || len(key) > maxTokenLen {
		return false
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// cleanupTimeout bounds Finish and Release, which run detached from the
// request: once an order is inserted, a client that hangs up must not keep
// its token from recording the result.
const cleanupTimeout = 2 * time.Second

// Submit creates the order for one Idempotency-Key, following the caller
// protocol of internal/platform/idempotency (doc.go), step by step:
//
//	no key                       → 400 idempotency_key_missing
//	body out of bounds           → 400 invalid_request (the key is not touched)
//	Claim fails (Redis)          → 503 dependency_unavailable; nothing inserted
//	Invalid                      → the database decides: the user's order with
//	                               this key and body → 200 replay; other body →
//	                               422; none → 400 idempotency_key_invalid
//	InUse                        → 409 idempotency_key_in_use
//	Done                         → 200 replay (read from the database)
//	Reused                       → 422 idempotency_key_reused
//	Claimed                      → INSERT, then Finish → 201; a duplicate
//	                               submit_token means an earlier attempt won:
//	                               same body → 200 replay, other → 422.
//
// replayed reports a 200 replay (Idempotent-Replayed: true) rather than a
// 201. The claim and the insert run detached from ctx's cancellation (a
// client hanging up mid-insert does not abandon them) and are bounded at 3/4
// of the lease; the read-only answers use ctx as it is.
func (s *Service) Submit(ctx context.Context, user, key string, in NewOrder) (o Order, replayed bool, err error) {
	defer func() { s.m.submits[submitOutcome(replayed, err)].Inc() }()
	if key == "" {
		return Order{}, false, apperr.New(apperr.IdempotencyKeyMissing,
			"The Idempotency-Key header is required; get a key from POST /v1/orders/tokens.")
	}
	amount, err := in.Validate()
	if err != nil {
		return Order{}, false, err
	}
	hash := in.BodyHash()

	// The claim and, if it wins, the insert run detached from the client (a
	// hang-up must not strand a claimed key) and within 3/4 of the lease.
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.attempt)
	defer cancel()
	c, err := s.tokens.Claim(actx, user, key, hash)
	if err != nil {
		// Fail closed: without Redis nobody knows whether another attempt
		// holds this key right now, so no insert and no answer from the DB.
		var ae *apperr.Error
		if errors.As(err, &ae) && ae.Code == apperr.DependencyUnavailable {
			return Order{}, false, err
		}
		return Order{}, false, apperr.Wrap(err, apperr.DependencyUnavailable, "Submit tokens are unavailable; try again later.")
	}
	switch c.Outcome {
	case idempotency.Invalid:
		// Unknown to Redis — or forgotten by it (expired TTL, restart,
		// failover). The order row remembers keys that created orders.
		return s.fromDB(ctx, user, key, hash, false)
	case idempotency.InUse:
		return Order{}, false, apperr.New(apperr.IdempotencyKeyInUse,
			"A request with this Idempotency-Key is in progress; retry shortly.")
	case idempotency.Done:
		return s.fromDB(ctx, user, key, hash, true)
	case idempotency.Reused:
		return Order{}, false, reusedErr()
	case idempotency.Claimed:
		return s.create(actx, user, key, hash, in, amount, c)
	default:
		return Order{}, false, apperr.Wrap(errors.New("order: unknown claim outcome "+c.Outcome.String()),
			apperr.Internal, "")
	}
}

// fromDB answers a key Redis does not hold as in flight: the user's order
// created with it decides. done says Redis recorded the key as finished with
// this body, so the order must exist.
func (s *Service) fromDB(ctx context.Context, user, key, hash string, done bool) (Order, bool, error) {
	if !plausibleKey(key) {
		return Order{}, false, invalidKey()
	}
	o, err := s.store.BySubmitToken(ctx, user, key)
	switch {
	case errors.Is(err, ErrNotFound) && done:
		return Order{}, false, apperr.Wrap(errors.New("order: token done in Redis but no order row has it"),
			apperr.Internal, "")
	case errors.Is(err, ErrNotFound):
		return Order{}, false, invalidKey()
	case err != nil:
		return Order{}, false, dbUnavailable(err)
	case o.BodyHash != hash:
		return Order{}, false, reusedErr()
	}
	return o, true, nil
}

// create runs the Claimed branch: this attempt holds the lease.
func (s *Service) create(ctx context.Context, user, key, hash string, in NewOrder, amount int64, c idempotency.Claim) (Order, bool, error) {
	o := Order{
		UserID: user, Status: PendingPayment, AmountCents: amount, Currency: in.Currency,
		Items: append([]Item(nil), in.Items...), SubmitToken: key, BodyHash: hash, Version: 1,
	}
	err := s.store.Create(ctx, &o)
	if err == nil {
		s.finish(ctx, key, c.LeaseID, o.ID)
		return o, false, nil
	}
	if !errors.Is(err, ErrDuplicateSubmit) {
		// Perhaps the insert committed after all (a lost reply): the retry
		// then claims again and meets the unique index, which decides.
		s.release(ctx, key, c.LeaseID)
		return Order{}, false, dbUnavailable(err)
	}
	// An earlier attempt inserted first (its lease ran out, or Redis lost
	// its Finish). The unique index, not Redis, has decided; reading its
	// decision gets a bound of its own, since this attempt may be past its
	// deadline already (it was the slow one).
	lctx, lcancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer lcancel()
	prev, lerr := s.store.BySubmitToken(lctx, user, key)
	switch {
	case errors.Is(lerr, ErrNotFound):
		// The token is on another user's order: it was never this user's.
		s.release(ctx, key, c.LeaseID)
		return Order{}, false, invalidKey()
	case lerr != nil:
		s.release(ctx, key, c.LeaseID)
		return Order{}, false, dbUnavailable(lerr)
	case prev.BodyHash != hash:
		// Release, not Finish: Finish would store this attempt's body hash
		// next to the other body's order.
		s.release(ctx, key, c.LeaseID)
		return Order{}, false, reusedErr()
	}
	s.finish(ctx, key, c.LeaseID, prev.ID)
	return prev, true, nil
}

// finish records the order on the token. A failure changes nothing for the
// client: the order stands, and replays are answered from the database.
func (s *Service) finish(ctx context.Context, key, lease string, id int64) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if err := s.tokens.Finish(ctx, key, lease, FormatID(id)); err != nil {
		s.log.LogAttrs(ctx, slog.LevelWarn, "order: finish submit token failed; replays will come from the database",
			slog.String("order_id", FormatID(id)), slog.Any("error", err))
	}
}

// release hands the key back so the client may retry at once. A failure
// only means the retry waits for the lease to end.
func (s *Service) release(ctx context.Context, key, lease string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if err := s.tokens.Release(ctx, key, lease); err != nil {
		s.log.LogAttrs(ctx, slog.LevelWarn, "order: release submit token failed; it frees when the lease ends",
			slog.Any("error", err))
	}
}

// RejectSubmit records a submit refused before it reached Submit (a body
// that did not decode) and returns err unchanged.
func (s *Service) RejectSubmit(err error) error {
	s.m.submits[submitOutcome(false, err)].Inc()
	return err
}

func invalidKey() error {
	return apperr.New(apperr.IdempotencyKeyInvalid,
		"The Idempotency-Key is unknown, expired or not yours; get a new one from POST /v1/orders/tokens.")
}

func reusedErr() error {
	return apperr.New(apperr.IdempotencyKeyReused,
		"This Idempotency-Key was already used with a different request body.")
}
