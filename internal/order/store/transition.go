package store

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"

	"github.com/onceonly/onceonly/internal/order"
	"github.com/onceonly/onceonly/internal/platform/db"
	"github.com/onceonly/onceonly/internal/platform/metrics"
)

// settable are the columns a transition may write besides the ones it always
// writes (status, version, updated_at). Add a column here when a transition
// needs it; the rest of a row never changes after the insert.
var settable = map[string]bool{"payment_id": true}

// Transition implements order.Store: one statement,
//
//	UPDATE orders SET status=?, version=version+1, updated_at=?[, extra]
//	WHERE id=? AND status=?[ AND user_id=?]
//
// and RowsAffected decides: 1 is "it happened", 0 is order.ErrConflict. There
// is no read before it, so two callers can never both see "PENDING" and both
// write. version+1 guarantees the row changes, so MySQL's rows-changed count
// (what it reports without clientFoundRows) cannot read a match as 0.
func (s *Store) Transition(ctx context.Context, id int64, from, to order.Status, extra *order.Extra) error {
	if !order.CanTransition(from, to) {
		return fmt.Errorf("store: %w: %s → %s", order.ErrIllegalTransition, from, to)
	}
	set := map[string]any{
		"status":     string(to),
		"version":    gorm.Expr("version + 1"),
		"updated_at": db.Now(),
	}
	q := s.db.WithContext(ctx).Table("orders").Where("id = ? AND status = ?", id, string(from))
	if extra != nil {
		if extra.OwnerID != "" {
			q = q.Where("user_id = ?", extra.OwnerID)
		}
		for col, v := range extra.Set {
			if !settable[col] {
				return fmt.Errorf("store: transition: column %q may not be set by a transition", col)
			}
			set[col] = v
		}
	}
	res := q.Updates(set)
	if res.Error != nil {
		return fmt.Errorf("store: transition %s → %s: %w", from, to, res.Error)
	}
	switch res.RowsAffected {
	case 1:
		return nil
	case 0:
		s.m.conflicts.WithLabelValues(string(to)).Inc()
		return fmt.Errorf("store: transition %s → %s of order %d: %w", from, to, id, order.ErrConflict)
	default: // id is the primary key: more than one row is impossible
		return fmt.Errorf("store: transition of order %d changed %d rows", id, res.RowsAffected)
	}
}

type storeMetrics struct {
	conflicts *prometheus.CounterVec
}

func newStoreMetrics(reg prometheus.Registerer) (*storeMetrics, error) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metrics.Namespace, Subsystem: "order",
		Name: "cas_conflicts_total",
		Help: "Order transitions whose conditional UPDATE matched no row (state already changed), by target status."},
		[]string{"to"})
	for _, st := range []order.Status{order.Paid, order.Cancelled} {
		c.WithLabelValues(string(st))
	}
	c, err := metrics.Register(reg, c)
	if err != nil {
		return nil, fmt.Errorf("store: metrics: %w", err)
	}
	return &storeMetrics{conflicts: c}, nil
}
