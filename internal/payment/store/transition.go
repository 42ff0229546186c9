package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"

	"github.com/onceonly/onceonly/internal/payment"
	"github.com/onceonly/onceonly/internal/payment/events"
	"github.com/onceonly/onceonly/internal/platform/db"
	"github.com/onceonly/onceonly/internal/platform/metrics"
	"github.com/onceonly/onceonly/internal/platform/outbox"
)

// Headers of every payment event on Kafka (DESIGN.md, "Kafka").
const (
	HeaderEventID   = outbox.HeaderEventID // "event_id"
	HeaderType      = "type"
	HeaderRequestID = "request_id"
)

// Transition implements payment.Store: in one transaction,
//
//	UPDATE payments SET status=?, version=version+1, updated_at=?[, gateway_txn_id=?][, refund_key=?][, event_id=?]
//	WHERE id=? AND status=?
//	INSERT INTO outbox_events (...)            -- when ch.Event is set
//
// RowsAffected decides: 1 is "it happened", and the event row commits with
// it; 0 is payment.ErrConflict and the transaction is rolled back, so no
// event exists for a transition that did not happen. There is no read
// before the UPDATE: of any number of concurrent callers exactly one
// matches (InnoDB's UPDATE reads the latest committed row under its lock;
// SQLite has one writer). A database error at any point rolls back both
// rows. version+1 guarantees the row changes, so MySQL's rows-changed count
// cannot report a match as 0. The event's id is kept on the row (event_id),
// so reconciliation can re-drive that very event later.
func (s *Store) Transition(ctx context.Context, id int64, from, to payment.Status, ch payment.Change) error {
	// db.Transaction re-runs a deadlock victim: concurrent CASes on one row
	// that also touch unique indexes (refund_key, the outbox's event_id) can
	// deadlock on MariaDB, and a re-run decides again from committed state.
	return s.transitionIn(func(fn func(tx *gorm.DB) error) error {
		return db.Transaction(ctx, s.db, fn)
	}, id, from, to, ch)
}

// transitionIn is Transition inside the transaction that run opens: the
// store's own (Transition) or a job's fenced one (MarkRefunded).
func (s *Store) transitionIn(run func(func(tx *gorm.DB) error) error, id int64, from, to payment.Status, ch payment.Change) error {
	if !payment.CanTransition(from, to) {
		return fmt.Errorf("store: %w: %s → %s", payment.ErrIllegalTransition, from, to)
	}
	var msg *outbox.Message
	if ch.Event != nil {
		m, err := message(*ch.Event, ch.RequestID)
		if err != nil {
			return err
		}
		msg = &m
	}
	at := ch.At
	if at.IsZero() {
		at = db.Now()
	}
	set := map[string]any{
		"status":     string(to),
		"version":    gorm.Expr("version + 1"),
		"updated_at": at.UTC(),
	}
	if ch.GatewayTxnID != "" {
		set["gateway_txn_id"] = ch.GatewayTxnID
	}
	if ch.RefundKey != "" {
		set["refund_key"] = ch.RefundKey
	}
	if msg != nil {
		set["event_id"] = msg.EventID
	}
	err := run(func(tx *gorm.DB) error {
		res := tx.Table("payments").Where("id = ? AND status = ?", id, string(from)).Updates(set)
		if res.Error != nil {
			return fmt.Errorf("store: transition %s → %s of payment %d: %w", from, to, id, res.Error)
		}
		switch res.RowsAffected {
		case 1:
		case 0:
			return fmt.Errorf("store: transition %s → %s of payment %d: %w", from, to, id, payment.ErrConflict)
		default: // id is the primary key: more than one row is impossible
			return fmt.Errorf("store: transition of payment %d changed %d rows", id, res.RowsAffected)
		}
		if msg == nil {
			return nil
		}
		return outbox.Add(tx, *msg)
	})
	if errors.Is(err, payment.ErrConflict) {
		s.m.conflicts.WithLabelValues(string(to)).Inc()
	}
	return err
}

// message is the outbox row of ev: topic payment.events, key = order id (one
// order's events stay in one partition, in order), and the contract's
// headers.
func message(ev events.Event, requestID string) (outbox.Message, error) {
	payload, err := json.Marshal(ev)
	if err != nil {
		return outbox.Message{}, fmt.Errorf("store: encode event %s: %w", ev.EventID, err)
	}
	h := map[string]string{HeaderEventID: ev.EventID, HeaderType: ev.Type}
	if requestID != "" {
		h[HeaderRequestID] = requestID
	}
	return outbox.Message{EventID: ev.EventID, Topic: events.Topic, Key: ev.OrderID, Payload: payload, Headers: h}, nil
}

type storeMetrics struct {
	conflicts *prometheus.CounterVec
}

func newStoreMetrics(reg prometheus.Registerer) (*storeMetrics, error) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metrics.Namespace, Subsystem: "payment",
		Name: "cas_conflicts_total",
		Help: "Payment transitions whose conditional UPDATE matched no row (another request moved it first), by target status."},
		[]string{"to"})
	for _, st := range []payment.Status{payment.Succeeded, payment.Failed, payment.Refunded} {
		c.WithLabelValues(string(st))
	}
	c, err := metrics.Register(reg, c)
	if err != nil {
		return nil, fmt.Errorf("store: metrics: %w", err)
	}
	return &storeMetrics{conflicts: c}, nil
}
