package order

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/onceonly/onceonly/internal/platform/apperr"
)

// Config configures a Service.
type Config struct {
	// Lease is the submit token's in-flight lease (ORDER_SUBMIT_LEASE). A
	// submit attempt is bounded at three quarters of it, so a live attempt
	// rarely outlives its lease and lets a retry in beside it.
	Lease time.Duration
	// Log receives what the client is not told (a lost Finish, a released
	// claim). Nil discards.
	Log *slog.Logger
	// Registerer receives onceonly_order_submits_total{outcome}. Nil
	// registers none.
	Registerer prometheus.Registerer
	// Payments is the payment service, for Pay (required by Pay only).
	Payments Payments
}

// Service is the order business: submit tokens, submits, reads, the
// user's cancel and pay. Every method returns *apperr.Error values the HTTP adapter
// maps to statuses; anything else is a bug (500). Safe for concurrent use.
type Service struct {
	store    Store
	tokens   Tokens
	payments Payments
	attempt  time.Duration
	log      *slog.Logger
	m        *serviceMetrics
}

// NewService returns a Service on store and tokens.
func NewService(store Store, tokens Tokens, cfg Config) (*Service, error) {
	if store == nil || tokens == nil {
		return nil, errors.New("order: NewService needs a Store and Tokens")
	}
	if cfg.Lease <= 0 {
		return nil, fmt.Errorf("order: Lease (ORDER_SUBMIT_LEASE) must be positive, got %v", cfg.Lease)
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	m, err := newServiceMetrics(cfg.Registerer)
	if err != nil {
		return nil, fmt.Errorf("order: metrics: %w", err)
	}
	return &Service{store: store, tokens: tokens, payments: cfg.Payments, attempt: cfg.Lease * 3 / 4, log: cfg.Log, m: m}, nil
}

// IssueToken hands user a fresh submit token. Errors: 429 too_many_tokens
// (the user holds the maximum of unused tokens), 503 dependency_unavailable.
func (s *Service) IssueToken(ctx context.Context, user string) (Token, error) {
	tok, err := s.tokens.Issue(ctx, user)
	if err != nil {
		var ae *apperr.Error
		if errors.As(err, &ae) {
			return Token{}, err
		}
		return Token{}, apperr.Wrap(err, apperr.DependencyUnavailable, "Submit tokens are unavailable; try again later.")
	}
	return Token{Value: tok.Value, ExpiresAt: tok.ExpiresAt}, nil
}

// Token is a submit token: the Idempotency-Key of exactly one order.
type Token struct {
	Value     string
	ExpiresAt time.Time
}

// Get returns the user's order with id (as the API spells it). Errors: 404
// not_found for an unparsable id, an unknown one or another user's order.
func (s *Service) Get(ctx context.Context, user, id string) (Order, error) {
	n, ok := ParseID(id)
	if !ok {
		return Order{}, notFound()
	}
	o, err := s.store.Get(ctx, user, n)
	if errors.Is(err, ErrNotFound) {
		return Order{}, notFound()
	}
	if err != nil {
		return Order{}, dbUnavailable(err)
	}
	return o, nil
}

// Cancel moves the user's order from PENDING_PAYMENT to CANCELLED with one
// conditional UPDATE, so of any number of concurrent cancels (or a cancel
// racing the payment) exactly one changes the row. Errors: 404 as for Get;
// 409 invalid_transition when the order is not PENDING_PAYMENT (including an
// order already cancelled: only the request that cancelled it gets 200).
func (s *Service) Cancel(ctx context.Context, user, id string) (Order, error) {
	n, ok := ParseID(id)
	if !ok {
		return Order{}, notFound()
	}
	err := s.store.Transition(ctx, n, PendingPayment, Cancelled, &Extra{OwnerID: user})
	if err != nil && !errors.Is(err, ErrConflict) {
		return Order{}, dbUnavailable(err)
	}
	// Read after the write, never before it: the UPDATE alone decided.
	o, gerr := s.store.Get(ctx, user, n)
	switch {
	case errors.Is(gerr, ErrNotFound):
		return Order{}, notFound()
	case gerr != nil:
		return Order{}, dbUnavailable(gerr)
	case err != nil:
		return Order{}, apperr.New(apperr.InvalidTransition,
			"Order is %s; only a %s order can be cancelled.", o.Status, PendingPayment)
	}
	return o, nil
}

// MaxBatch bounds BatchGet.
const MaxBatch = 500

// BatchGet returns the orders among ids that exist, by id ascending, for
// reconciliation (any user). Unparsable and unknown ids are simply absent;
// duplicates count once. Errors: 400 invalid_request for more than MaxBatch.
func (s *Service) BatchGet(ctx context.Context, ids []string) ([]Order, error) {
	if len(ids) > MaxBatch {
		return nil, invalid("ids may hold at most %d ids; got %d.", MaxBatch, len(ids))
	}
	seen := make(map[int64]bool, len(ids))
	nums := make([]int64, 0, len(ids))
	for _, id := range ids {
		if n, ok := ParseID(id); ok && !seen[n] {
			seen[n] = true
			nums = append(nums, n)
		}
	}
	if len(nums) == 0 {
		return []Order{}, nil
	}
	found, err := s.store.GetMany(ctx, nums)
	if err != nil {
		return nil, dbUnavailable(err)
	}
	return found, nil
}

func notFound() error { return apperr.New(apperr.NotFound, "Order not found.") }

func dbUnavailable(err error) error {
	return apperr.Wrap(err, apperr.DependencyUnavailable, "The order database is unavailable; try again later.")
}
