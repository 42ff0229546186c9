package payment

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/onceonly/onceonly/internal/platform/apperr"
)

// Config configures a Service.
type Config struct {
	// Secrets are the callback keys (PAYMENT_GATEWAY_SECRET): any verifies,
	// the first signs. At least one, none empty.
	Secrets []string
	// Now is the clock the callback's ±300 s window is measured on (nil:
	// time.Now). Tests move it. Rows are stamped by the database package's
	// clock (db.Now) whatever this says, so created_at ≤ updated_at holds.
	Now func() time.Time
	// Notify, if set, is called after every commit that added an outbox
	// event: the relay's wake-up (outbox.Relay.Notify). It must not block.
	// Without it the relay still finds the event at its next poll.
	Notify func()
	// Log receives what the client is not told. Nil discards.
	Log *slog.Logger
	// Registerer receives onceonly_payment_creates_total and
	// onceonly_payment_callbacks_total. Nil registers none.
	Registerer prometheus.Registerer
}

// Service is the payment business: idempotent creation, reads, and the
// gateway callback. Every method returns *apperr.Error values the HTTP
// adapter maps to statuses; anything else is a bug (500). Safe for
// concurrent use.
type Service struct {
	store    Store
	verifier *Verifier
	notify   func()
	log      *slog.Logger
	m        *serviceMetrics
}

// NewService returns a Service on store.
func NewService(store Store, cfg Config) (*Service, error) {
	if store == nil {
		return nil, errors.New("payment: NewService needs a Store")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Notify == nil {
		cfg.Notify = func() {}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	v, err := NewVerifier(cfg.Secrets, cfg.Now)
	if err != nil {
		return nil, err
	}
	m, err := newServiceMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	return &Service{store: store, verifier: v, notify: cfg.Notify, log: cfg.Log, m: m}, nil
}

// Get returns the payment with id (as the API spells it). Errors: 404
// not_found for an unparsable or unknown id; 503 when the database fails.
func (s *Service) Get(ctx context.Context, id string) (Payment, error) {
	n, ok := ParseID(id)
	if !ok {
		return Payment{}, notFound()
	}
	p, err := s.store.Get(ctx, n)
	switch {
	case errors.Is(err, ErrNotFound):
		return Payment{}, notFound()
	case err != nil:
		return Payment{}, dbUnavailable(err)
	}
	return p, nil
}

func notFound() error { return apperr.New(apperr.NotFound, "Payment not found.") }

func dbUnavailable(err error) error {
	return apperr.Wrap(err, apperr.DependencyUnavailable, "The payment database is unavailable; try again later.")
}

func invalid(format string, args ...any) error {
	return apperr.New(apperr.InvalidRequest, format, args...)
}
