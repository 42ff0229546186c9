package reconcile

import (
	"context"
	"errors"
	"time"

	"github.com/onceonly/onceonly/internal/payment"
	"github.com/onceonly/onceonly/internal/payment/events"
	"github.com/onceonly/onceonly/internal/platform/lock"
)

// ErrNoReport is returned by Store.LatestReport before the first run.
var ErrNoReport = errors.New("reconcile: no report yet")

// Key is a position in the keyset order (updated_at, id) of payments.
type Key struct {
	UpdatedAt time.Time
	ID        int64
}

// RedriveResult is what Store.Redrive did with a payment's event.
type RedriveResult int

const (
	// Redriven: the row was published; it is unpublished again (same row,
	// same event_id) and the relay sends it once more.
	Redriven RedriveResult = iota + 1
	// Reinserted: the row had been pruned; a rebuilt event with the
	// original event_id was added.
	Reinserted
	// AlreadyQueued: the row is still unpublished — the event is on its
	// way already, so nothing was changed (a repair is not repeated).
	AlreadyQueued
)

// Store is what reconciliation reads and writes (adapter:
// internal/payment/store). Every write takes the run's Fence and happens in
// one fenced transaction (lock.Fence.Tx): once a newer holder of the job's
// lock has taken a token, it fails with lock.ErrFenced and writes nothing.
// Implementations must be safe for concurrent use.
type Store interface {
	// PaymentsUpdated returns at most limit payments with from ≤ updated_at
	// ≤ to strictly after position after (nil: from the start), in the
	// keyset order (updated_at, id). Never an OFFSET: a page costs the same
	// wherever it is, and rows that change meanwhile are neither repeated
	// nor skipped (a change moves a row past `to`).
	PaymentsUpdated(ctx context.Context, from, to time.Time, after *Key, limit int) ([]payment.Payment, error)
	// PaymentsOfOrders returns every payment (every attempt) of the orders.
	PaymentsOfOrders(ctx context.Context, orderIDs []string) ([]payment.Payment, error)
	// Redrive makes the outbox row with ev.EventID unpublished again, or adds
	// ev if the row was pruned, or leaves a still-unpublished row alone (see
	// RedriveResult). requestID is the rebuilt event's request_id header.
	Redrive(ctx context.Context, f lock.Fence, ev events.Event, requestID string) (RedriveResult, error)
	// MarkRefunded moves payment id SUCCEEDED → REFUNDED with ch (its refund
	// key and payment.refunded event) in one fenced transaction:
	// payment.ErrConflict when it is no longer SUCCEEDED (nothing written).
	MarkRefunded(ctx context.Context, f lock.Fence, id int64, ch payment.Change) error
	// SaveReport stores r with its diffs (at most MaxDiffs) and sets r.ID.
	SaveReport(ctx context.Context, f lock.Fence, r *Report) error
	// LatestReport returns the newest stored report with its diffs, or
	// ErrNoReport.
	LatestReport(ctx context.Context) (Report, error)
}
