// Package store is the order service's gorm adapter: it implements
// order.Store on MySQL/MariaDB and SQLite (internal/platform/db) and owns the
// orders table's migrations.
//
// Every status change goes through Transition, one conditional UPDATE whose
// rows-affected count is the answer; version+1 in every such UPDATE keeps
// MySQL's rows-changed count equal to rows-matched.
package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/onceonly/onceonly/internal/order"
	"github.com/onceonly/onceonly/internal/platform/db"
)

// Store implements order.Store. It is safe for concurrent use.
type Store struct {
	db *gorm.DB
	m  *storeMetrics
}

var _ order.Store = (*Store)(nil)

// New returns a Store on gdb (migrated with Migrations). The CAS-conflict
// counter is registered on reg (nil registers none); a second Store on the
// same registry shares it.
func New(gdb *gorm.DB, reg prometheus.Registerer) (*Store, error) {
	m, err := newStoreMetrics(reg)
	if err != nil {
		return nil, err
	}
	return &Store{db: gdb, m: m}, nil
}

// WithTx returns a Store whose statements run in tx, for a caller that
// commits a transition together with other rows (an event consumed, a fence
// checked). It shares s's metrics.
func (s *Store) WithTx(tx *gorm.DB) *Store { return &Store{db: tx, m: s.m} }

// row is the orders table as gorm sees it.
type row struct {
	ID          int64 `gorm:"primaryKey;autoIncrement"`
	UserID      string
	Status      string
	AmountCents int64
	Currency    string
	Items       string
	PaymentID   sql.NullString
	SubmitToken string
	BodyHash    string
	Version     int64
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

func (row) TableName() string { return "orders" }

// item is an order line in the items column (JSON text). Its encoding is
// the stored format: keep the names.
type item struct {
	SKU        string `json:"sku"`
	Quantity   int64  `json:"quantity"`
	PriceCents int64  `json:"price_cents"`
}

func toRow(o *order.Order) (row, error) {
	items := make([]item, len(o.Items))
	for i, it := range o.Items {
		items[i] = item(it)
	}
	b, err := json.Marshal(items)
	if err != nil {
		return row{}, err
	}
	return row{
		ID: o.ID, UserID: o.UserID, Status: string(o.Status), AmountCents: o.AmountCents, Currency: o.Currency,
		Items: string(b), PaymentID: sql.NullString{String: o.PaymentID, Valid: o.PaymentID != ""},
		SubmitToken: o.SubmitToken, BodyHash: o.BodyHash, Version: o.Version,
		CreatedAt: o.CreatedAt, UpdatedAt: o.UpdatedAt,
	}, nil
}

func (r row) toOrder() (order.Order, error) {
	var items []item
	if err := json.Unmarshal([]byte(r.Items), &items); err != nil {
		return order.Order{}, fmt.Errorf("store: order %d: items column: %w", r.ID, err)
	}
	o := order.Order{
		ID: r.ID, UserID: r.UserID, Status: order.Status(r.Status), AmountCents: r.AmountCents,
		Currency: r.Currency, Items: make([]order.Item, len(items)), PaymentID: r.PaymentID.String,
		SubmitToken: r.SubmitToken, BodyHash: r.BodyHash, Version: r.Version,
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
	}
	for i, it := range items {
		o.Items[i] = order.Item(it)
	}
	return o, nil
}

func toOrders(rows []row) ([]order.Order, error) {
	out := make([]order.Order, len(rows))
	for i, r := range rows {
		o, err := r.toOrder()
		if err != nil {
			return nil, err
		}
		out[i] = o
	}
	return out, nil
}

// Create implements order.Store. It stamps CreatedAt = UpdatedAt = now and
// Version = 1.
func (s *Store) Create(ctx context.Context, o *order.Order) error {
	now := db.Now()
	o.ID, o.Version, o.CreatedAt, o.UpdatedAt = 0, 1, now, now
	r, err := toRow(o)
	if err != nil {
		return fmt.Errorf("store: create: %w", err)
	}
	if err := s.db.WithContext(ctx).Create(&r).Error; err != nil {
		if db.IsDuplicate(err) {
			return fmt.Errorf("store: create: %w", order.ErrDuplicateSubmit)
		}
		return fmt.Errorf("store: create: %w", err)
	}
	o.ID = r.ID
	return nil
}

// BySubmitToken implements order.Store.
func (s *Store) BySubmitToken(ctx context.Context, userID, token string) (order.Order, error) {
	return s.take(s.db.WithContext(ctx).Where("submit_token = ? AND user_id = ?", token, userID))
}

// Get implements order.Store.
func (s *Store) Get(ctx context.Context, userID string, id int64) (order.Order, error) {
	q := s.db.WithContext(ctx).Where("id = ?", id)
	if userID != "" {
		q = q.Where("user_id = ?", userID)
	}
	return s.take(q)
}

// GetForUpdate returns order id with a locking read (SELECT … FOR UPDATE on
// MySQL; SQLite has one writer, so its read is current already), for a
// caller inside a transaction (WithTx) that must see the committed state, not
// its REPEATABLE READ snapshot: after a refused CAS, to learn what the order
// became. ErrNotFound if there is no such order.
func (s *Store) GetForUpdate(ctx context.Context, id int64) (order.Order, error) {
	return s.take(s.db.WithContext(ctx).Clauses(clause.Locking{Strength: clause.LockingStrengthUpdate}).Where("id = ?", id))
}

func (s *Store) take(q *gorm.DB) (order.Order, error) {
	var r row
	if err := q.Take(&r).Error; err != nil {
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return order.Order{}, order.ErrNotFound
		}
		return order.Order{}, fmt.Errorf("store: get: %w", err)
	}
	return r.toOrder()
}

// List implements order.Store: keyset on the (user_id, id) index.
func (s *Store) List(ctx context.Context, q order.ListQuery) ([]order.Order, error) {
	tx := s.db.WithContext(ctx).Where("user_id = ?", q.UserID)
	if q.Status != "" {
		tx = tx.Where("status = ?", string(q.Status))
	}
	if q.BeforeID > 0 {
		tx = tx.Where("id < ?", q.BeforeID)
	}
	var rows []row
	if err := tx.Order("id DESC").Limit(q.Limit).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("store: list: %w", err)
	}
	return toOrders(rows)
}

// ListUpdated implements order.Store: keyset on (updated_at, id), served by
// the (status, updated_at) index when a status is given.
func (s *Store) ListUpdated(ctx context.Context, q order.UpdatedQuery) ([]order.Order, error) {
	tx := s.db.WithContext(ctx).Where("updated_at >= ? AND updated_at < ?", q.From.UTC(), q.To.UTC())
	if q.Status != "" {
		tx = tx.Where("status = ?", string(q.Status))
	}
	if q.After != nil {
		at := q.After.UpdatedAt.UTC()
		tx = tx.Where("(updated_at > ? OR (updated_at = ? AND id > ?))", at, at, q.After.ID)
	}
	var rows []row
	if err := tx.Order("updated_at, id").Limit(q.Limit).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("store: list updated: %w", err)
	}
	return toOrders(rows)
}

// GetMany implements order.Store.
func (s *Store) GetMany(ctx context.Context, ids []int64) ([]order.Order, error) {
	if len(ids) == 0 {
		return []order.Order{}, nil
	}
	var rows []row
	if err := s.db.WithContext(ctx).Where("id IN ?", ids).Order("id").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("store: get many: %w", err)
	}
	return toOrders(rows)
}
