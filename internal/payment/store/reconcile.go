package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/onceonly/onceonly/internal/payment"
	"github.com/onceonly/onceonly/internal/payment/events"
	"github.com/onceonly/onceonly/internal/payment/reconcile"
	"github.com/onceonly/onceonly/internal/platform/lock"
	"github.com/onceonly/onceonly/internal/platform/outbox"
)

// The store is reconciliation's storage too: reads by keyset, and every
// write in the run's fenced transaction.
var _ reconcile.Store = (*Store)(nil)

// PaymentsUpdated implements reconcile.Store: keyset on (updated_at, id),
// served by idx_payments_updated — a range scan of limit rows wherever the
// page is, never an OFFSET.
func (s *Store) PaymentsUpdated(ctx context.Context, from, to time.Time, after *reconcile.Key, limit int) ([]payment.Payment, error) {
	q := s.db.WithContext(ctx).Where("updated_at >= ? AND updated_at <= ?", from.UTC(), to.UTC())
	if after != nil {
		at := after.UpdatedAt.UTC()
		q = q.Where("(updated_at > ? OR (updated_at = ? AND id > ?))", at, at, after.ID)
	}
	var rows []row
	if err := q.Order("updated_at, id").Limit(limit).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("store: payments updated: %w", err)
	}
	return toPayments(rows), nil
}

// PaymentsOfOrders implements reconcile.Store, on UNIQUE(order_id, attempt).
func (s *Store) PaymentsOfOrders(ctx context.Context, orderIDs []string) ([]payment.Payment, error) {
	if len(orderIDs) == 0 {
		return nil, nil
	}
	var rows []row
	if err := s.db.WithContext(ctx).Where("order_id IN ?", orderIDs).Order("order_id, attempt").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("store: payments of orders: %w", err)
	}
	return toPayments(rows), nil
}

func toPayments(rows []row) []payment.Payment {
	out := make([]payment.Payment, len(rows))
	for i, r := range rows {
		out[i] = r.toPayment()
	}
	return out
}

// Redrive implements reconcile.Store in one fenced transaction: a published
// row is made unpublished (outbox.Redrive: same row, same event_id); a
// pruned one is added again from ev, with the headers a transition writes;
// an unpublished one is left alone.
func (s *Store) Redrive(ctx context.Context, f lock.Fence, ev events.Event, requestID string) (reconcile.RedriveResult, error) {
	var res reconcile.RedriveResult
	err := f.Tx(ctx, s.db, func(tx *gorm.DB) error {
		var pending []int
		if err := tx.Raw("SELECT CASE WHEN published_at IS NULL THEN 1 ELSE 0 END FROM outbox_events WHERE event_id = ?",
			ev.EventID).Scan(&pending).Error; err != nil {
			return err
		}
		if len(pending) == 1 && pending[0] == 1 {
			res = reconcile.AlreadyQueued
			return nil
		}
		if len(pending) == 1 {
			ok, err := outbox.Redrive(tx, ev.EventID)
			if err != nil || ok {
				res = reconcile.Redriven
				return err
			}
			// Pruned between the two statements: add it back below.
		}
		m, err := message(ev, requestID)
		if err != nil {
			return err
		}
		res = reconcile.Reinserted
		return outbox.Add(tx, m)
	})
	if err != nil {
		return 0, fmt.Errorf("store: redrive %s: %w", ev.EventID, err)
	}
	return res, nil
}

// MarkRefunded implements reconcile.Store: Transition's CAS and outbox
// INSERT, inside the run's fenced transaction.
func (s *Store) MarkRefunded(ctx context.Context, f lock.Fence, id int64, ch payment.Change) error {
	return s.transitionIn(func(fn func(tx *gorm.DB) error) error {
		return f.Tx(ctx, s.db, fn)
	}, id, payment.Succeeded, payment.Refunded, ch)
}

// runRow is reconciliation_runs.
type runRow struct {
	ID          int64 `gorm:"primaryKey;autoIncrement"`
	Status      string
	Error       sql.NullString
	WindowStart time.Time
	WindowEnd   time.Time
	StartedAt   time.Time
	FinishedAt  time.Time
	Checked     int64
	Matched     int64
	Republished int64
	Queried     int64
	Refunded    int64
	Flagged     int64
	DiffsTotal  int64
	FenceToken  int64
}

func (runRow) TableName() string { return "reconciliation_runs" }

// diffRow is reconciliation_diffs.
type diffRow struct {
	ID        int64 `gorm:"primaryKey;autoIncrement"`
	RunID     int64
	Kind      string
	PaymentID sql.NullInt64
	OrderID   string
	Action    string
}

func (diffRow) TableName() string { return "reconciliation_diffs" }

// SaveReport implements reconcile.Store: the run row and its diffs (at most
// reconcile.MaxDiffs, in multi-row INSERTs) in one fenced transaction.
func (s *Store) SaveReport(ctx context.Context, f lock.Fence, r *reconcile.Report) error {
	diffs := r.Diffs
	if len(diffs) > reconcile.MaxDiffs {
		diffs = diffs[:reconcile.MaxDiffs]
	}
	rr := runRow{Status: string(r.Status), Error: nullString(r.Error),
		WindowStart: r.WindowStart.UTC(), WindowEnd: r.WindowEnd.UTC(), StartedAt: r.StartedAt.UTC(), FinishedAt: r.FinishedAt.UTC(),
		Checked: r.Checked, Matched: r.Matched, Republished: r.Republished, Queried: r.Queried, Refunded: r.Refunded,
		Flagged: r.Flagged, DiffsTotal: r.DiffsTotal, FenceToken: r.FenceToken}
	err := f.Tx(ctx, s.db, func(tx *gorm.DB) error {
		if err := tx.Create(&rr).Error; err != nil {
			return err
		}
		if len(diffs) == 0 {
			return nil
		}
		rows := make([]diffRow, len(diffs))
		for i, d := range diffs {
			rows[i] = diffRow{RunID: rr.ID, Kind: d.Kind, OrderID: d.OrderID, Action: d.Action,
				PaymentID: sql.NullInt64{Int64: d.PaymentID, Valid: d.PaymentID != 0}}
		}
		return tx.CreateInBatches(rows, 250).Error
	})
	if err != nil {
		return fmt.Errorf("store: save reconciliation report: %w", err)
	}
	r.ID = rr.ID
	return nil
}

// LatestReport implements reconcile.Store: the run with the highest id (runs
// are exclusive, so ids follow their order) and its diffs in found order.
func (s *Store) LatestReport(ctx context.Context) (reconcile.Report, error) {
	var rr runRow
	err := s.db.WithContext(ctx).Order("id DESC").Limit(1).Take(&rr).Error
	switch {
	case errors.Is(err, gorm.ErrRecordNotFound):
		return reconcile.Report{}, reconcile.ErrNoReport
	case err != nil:
		return reconcile.Report{}, fmt.Errorf("store: latest reconciliation report: %w", err)
	}
	var rows []diffRow
	if err := s.db.WithContext(ctx).Where("run_id = ?", rr.ID).Order("id").Find(&rows).Error; err != nil {
		return reconcile.Report{}, fmt.Errorf("store: reconciliation diffs of run %d: %w", rr.ID, err)
	}
	rep := reconcile.Report{ID: rr.ID, Status: reconcile.Status(rr.Status), Error: rr.Error.String,
		WindowStart: rr.WindowStart.UTC(), WindowEnd: rr.WindowEnd.UTC(), StartedAt: rr.StartedAt.UTC(), FinishedAt: rr.FinishedAt.UTC(),
		Checked: rr.Checked, Matched: rr.Matched, Republished: rr.Republished, Queried: rr.Queried, Refunded: rr.Refunded,
		Flagged: rr.Flagged, DiffsTotal: rr.DiffsTotal, FenceToken: rr.FenceToken, Diffs: make([]reconcile.Diff, len(rows))}
	for i, d := range rows {
		rep.Diffs[i] = reconcile.Diff{Kind: d.Kind, PaymentID: d.PaymentID.Int64, OrderID: d.OrderID, Action: d.Action}
	}
	return rep, nil
}
