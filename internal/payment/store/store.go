// Package store is the payment service's gorm adapter: it implements
// payment.Store on MySQL/MariaDB and SQLite (internal/platform/db) and owns
// the payments and callback_records tables.
//
// Every status change goes through Transition: one conditional UPDATE whose
// rows-affected count is the answer, in one transaction with the outbox row
// of its event (internal/platform/outbox). version+1 in every such UPDATE
// keeps MySQL's rows-changed count equal to rows-matched.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"

	"github.com/onceonly/onceonly/internal/payment"
	"github.com/onceonly/onceonly/internal/platform/db"
)

// Store implements payment.Store. It is safe for concurrent use.
type Store struct {
	db *gorm.DB
	m  *storeMetrics
}

var _ payment.Store = (*Store)(nil)

// New returns a Store on gdb (migrated with Migrations and
// outbox.Migrations). The CAS-conflict counter is registered on reg (nil
// registers none); a second Store on the same registry shares it.
func New(gdb *gorm.DB, reg prometheus.Registerer) (*Store, error) {
	m, err := newStoreMetrics(reg)
	if err != nil {
		return nil, err
	}
	return &Store{db: gdb, m: m}, nil
}

// row is the payments table as gorm sees it.
type row struct {
	ID           int64 `gorm:"primaryKey;autoIncrement"`
	OrderID      string
	UserID       string
	Attempt      int
	Status       string
	AmountCents  int64
	Currency     string
	GatewayTxnID sql.NullString
	RefundKey    sql.NullString
	EventID      sql.NullString
	Version      int64
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

func (row) TableName() string { return "payments" }

func (r row) toPayment() payment.Payment {
	return payment.Payment{
		ID: r.ID, OrderID: r.OrderID, UserID: r.UserID, Attempt: r.Attempt, Status: payment.Status(r.Status),
		AmountCents: r.AmountCents, Currency: r.Currency, GatewayTxnID: r.GatewayTxnID.String,
		RefundKey: r.RefundKey.String, EventID: r.EventID.String, Version: r.Version,
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
	}
}

func nullString(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

// Create implements payment.Store. It stamps CreatedAt = UpdatedAt = now and
// Version = 1; a second row for (order_id, attempt) is payment.ErrDuplicate.
func (s *Store) Create(ctx context.Context, p *payment.Payment) error {
	now := db.Now()
	p.ID, p.Version, p.CreatedAt, p.UpdatedAt = 0, 1, now, now
	r := row{
		OrderID: p.OrderID, UserID: p.UserID, Attempt: p.Attempt, Status: string(p.Status),
		AmountCents: p.AmountCents, Currency: p.Currency, GatewayTxnID: nullString(p.GatewayTxnID),
		RefundKey: nullString(p.RefundKey), EventID: nullString(p.EventID), Version: 1, CreatedAt: now, UpdatedAt: now,
	}
	if err := s.db.WithContext(ctx).Create(&r).Error; err != nil {
		if db.IsDuplicate(err) {
			return fmt.Errorf("store: create payment for order %s attempt %d: %w", p.OrderID, p.Attempt, payment.ErrDuplicate)
		}
		return fmt.Errorf("store: create payment: %w", err)
	}
	p.ID = r.ID
	return nil
}

// Get implements payment.Store.
func (s *Store) Get(ctx context.Context, id int64) (payment.Payment, error) {
	return s.take(s.db.WithContext(ctx).Where("id = ?", id))
}

// Latest implements payment.Store, on the UNIQUE(order_id, attempt) index.
func (s *Store) Latest(ctx context.Context, orderID string) (payment.Payment, error) {
	return s.take(s.db.WithContext(ctx).Where("order_id = ?", orderID).Order("attempt DESC").Limit(1))
}

func (s *Store) take(q *gorm.DB) (payment.Payment, error) {
	var r row
	if err := q.Take(&r).Error; err != nil {
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return payment.Payment{}, payment.ErrNotFound
		}
		return payment.Payment{}, fmt.Errorf("store: get payment: %w", err)
	}
	return r.toPayment(), nil
}

// recordRow is the callback_records table.
type recordRow struct {
	ID         int64 `gorm:"primaryKey;autoIncrement"`
	Kind       string
	PaymentID  int64
	Status     string
	RequestID  string
	RawBody    []byte
	ReceivedAt time.Time
}

func (recordRow) TableName() string { return "callback_records" }

// Record implements payment.Store.
func (s *Store) Record(ctx context.Context, r payment.CallbackRecord) error {
	at := r.ReceivedAt
	if at.IsZero() {
		at = db.Now()
	}
	body := r.Body
	if body == nil {
		body = []byte{}
	}
	rr := recordRow{Kind: r.Kind, PaymentID: r.PaymentID, Status: string(r.Status), RequestID: r.RequestID,
		RawBody: body, ReceivedAt: at.UTC()}
	if err := s.db.WithContext(ctx).Create(&rr).Error; err != nil {
		return fmt.Errorf("store: record %s callback for payment %d: %w", r.Kind, r.PaymentID, err)
	}
	return nil
}

// Records returns the callback records of payment id, oldest first (for
// operators and tests).
func (s *Store) Records(ctx context.Context, id int64) ([]payment.CallbackRecord, error) {
	var rows []recordRow
	if err := s.db.WithContext(ctx).Where("payment_id = ?", id).Order("id").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("store: records of payment %d: %w", id, err)
	}
	out := make([]payment.CallbackRecord, len(rows))
	for i, r := range rows {
		out[i] = payment.CallbackRecord{Kind: r.Kind, PaymentID: r.PaymentID, Status: payment.Status(r.Status),
			RequestID: r.RequestID, Body: r.RawBody, ReceivedAt: r.ReceivedAt.UTC()}
	}
	return out, nil
}
