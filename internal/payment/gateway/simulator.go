package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"gorm.io/gorm"

	"github.com/onceonly/onceonly/internal/payment"
	"github.com/onceonly/onceonly/internal/platform/db"
)

// Payments finds a payment by its API id (*payment.Service): errors are
// *apperr.Error values (404 not_found, 503).
type Payments interface {
	Get(ctx context.Context, id string) (payment.Payment, error)
}

// Config configures a Simulator.
type Config struct {
	// DB holds sim_gateway_records (migrated with Migrations).
	DB *gorm.DB
	// Payments looks up the payment a sandbox call names.
	Payments Payments
	// Secret signs the callbacks: the first PAYMENT_GATEWAY_SECRET key.
	Secret string
	// CallbackURL is the service's own callback endpoint
	// (http://127.0.0.1:PORT/v1/payments/callback).
	CallbackURL string
	// Client sends the callbacks (nil: a client of its own with timeouts).
	Client *http.Client
	// Log receives delivery failures; nil discards.
	Log *slog.Logger
}

// Simulator is the gateway of the demo and the tests. It implements
// payment.Gateway and is safe for concurrent use.
type Simulator struct {
	db     *gorm.DB
	pays   Payments
	secret string
	url    string
	client *http.Client
	own    *http.Transport
	log    *slog.Logger
}

var _ payment.Gateway = (*Simulator)(nil)

// NewSimulator checks cfg and returns a Simulator.
func NewSimulator(cfg Config) (*Simulator, error) {
	if cfg.DB == nil || cfg.Payments == nil || cfg.Secret == "" || cfg.CallbackURL == "" {
		return nil, errors.New("gateway: the simulator needs DB, Payments, Secret and CallbackURL")
	}
	s := &Simulator{db: cfg.DB, pays: cfg.Payments, secret: cfg.Secret, url: cfg.CallbackURL,
		client: cfg.Client, log: cfg.Log}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.client == nil {
		// A transport of its own: up to MaxCopies callbacks reuse a bounded
		// set of keep-alive connections instead of dialling one each.
		s.own = &http.Transport{MaxIdleConns: maxParallel, MaxIdleConnsPerHost: maxParallel,
			IdleConnTimeout: 30 * time.Second, ResponseHeaderTimeout: 15 * time.Second}
		s.client = &http.Client{Transport: s.own, Timeout: 20 * time.Second}
	}
	return s, nil
}

// Close releases the idle connections of the simulator's own client.
func (s *Simulator) Close() error {
	if s.own != nil {
		s.own.CloseIdleConnections()
	}
	return nil
}

// Record kinds in sim_gateway_records.
const (
	kindOutcome = "outcome" // record_key = payment id
	kindRefund  = "refund"  // record_key = refund key
)

// record is the sim_gateway_records table.
type record struct {
	ID           int64 `gorm:"primaryKey;autoIncrement"`
	Kind         string
	RecordKey    string
	PaymentID    int64
	Status       string
	GatewayTxnID string
	AmountCents  int64
	Currency     string
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

func (record) TableName() string { return "sim_gateway_records" }

// Settle records st (SUCCEEDED or FAILED) as the gateway's outcome of p and
// returns it. The same status again keeps the recorded gateway_txn_id; a
// different one replaces the outcome with a new id. Concurrent calls end
// with one outcome row.
func (s *Simulator) Settle(ctx context.Context, p payment.Payment, st payment.Status) (payment.Outcome, error) {
	if st != payment.Succeeded && st != payment.Failed {
		return payment.Outcome{}, fmt.Errorf("gateway: settle payment %d as %q: only SUCCEEDED or FAILED", p.ID, st)
	}
	key := payment.FormatID(p.ID)
	for range 5 {
		cur, err := s.find(ctx, kindOutcome, key)
		if errors.Is(err, gorm.ErrRecordNotFound) {
			now := db.Now()
			r := record{Kind: kindOutcome, RecordKey: key, PaymentID: p.ID, Status: string(st), GatewayTxnID: newTxnID(),
				AmountCents: p.AmountCents, Currency: p.Currency, CreatedAt: now, UpdatedAt: now}
			err := s.db.WithContext(ctx).Create(&r).Error
			if db.IsDuplicate(err) {
				continue // a concurrent Settle inserted it: read that one
			}
			if err != nil {
				return payment.Outcome{}, fmt.Errorf("gateway: settle payment %d: %w", p.ID, err)
			}
			return payment.Outcome{Status: st, GatewayTxnID: r.GatewayTxnID}, nil
		}
		if err != nil {
			return payment.Outcome{}, fmt.Errorf("gateway: settle payment %d: %w", p.ID, err)
		}
		if cur.Status == string(st) {
			return payment.Outcome{Status: st, GatewayTxnID: cur.GatewayTxnID}, nil
		}
		txn := newTxnID()
		res := s.db.WithContext(ctx).Model(&record{}).Where("id = ? AND status = ?", cur.ID, cur.Status).
			Updates(map[string]any{"status": string(st), "gateway_txn_id": txn, "updated_at": db.Now()})
		if res.Error != nil {
			return payment.Outcome{}, fmt.Errorf("gateway: settle payment %d: %w", p.ID, res.Error)
		}
		if res.RowsAffected == 1 {
			return payment.Outcome{Status: st, GatewayTxnID: txn}, nil
		}
	}
	return payment.Outcome{}, fmt.Errorf("gateway: settle payment %d: the outcome kept changing", p.ID)
}

// Query implements payment.Gateway: the recorded outcome, or PENDING when
// the gateway has none.
func (s *Simulator) Query(ctx context.Context, p payment.Payment) (payment.Outcome, error) {
	r, err := s.find(ctx, kindOutcome, payment.FormatID(p.ID))
	switch {
	case errors.Is(err, gorm.ErrRecordNotFound):
		return payment.Outcome{Status: payment.Pending}, nil
	case err != nil:
		return payment.Outcome{}, fmt.Errorf("gateway: query payment %d: %w", p.ID, err)
	}
	return payment.Outcome{Status: payment.Status(r.Status), GatewayTxnID: r.GatewayTxnID}, nil
}

// Refund implements payment.Gateway: one refund row per key (the UNIQUE
// index decides under concurrency); the same key again is a no-op, the same
// key for another payment an error.
func (s *Simulator) Refund(ctx context.Context, p payment.Payment, refundKey string) error {
	if refundKey == "" || len(refundKey) > 190 {
		return fmt.Errorf("gateway: refund payment %d: the key must be 1 to 190 bytes", p.ID)
	}
	now := db.Now()
	r := record{Kind: kindRefund, RecordKey: refundKey, PaymentID: p.ID, Status: string(payment.Refunded),
		GatewayTxnID: newTxnID(), AmountCents: p.AmountCents, Currency: p.Currency, CreatedAt: now, UpdatedAt: now}
	err := s.db.WithContext(ctx).Create(&r).Error
	if err == nil {
		return nil
	}
	if !db.IsDuplicate(err) {
		return fmt.Errorf("gateway: refund payment %d: %w", p.ID, err)
	}
	prev, ferr := s.find(ctx, kindRefund, refundKey)
	if ferr != nil {
		return fmt.Errorf("gateway: refund payment %d: %w", p.ID, ferr)
	}
	if prev.PaymentID != p.ID {
		return fmt.Errorf("gateway: refund key %q was used for payment %d, not %d", refundKey, prev.PaymentID, p.ID)
	}
	return nil
}

// Refunds counts the refunds recorded for payment id.
func (s *Simulator) Refunds(ctx context.Context, id int64) (int64, error) {
	var n int64
	err := s.db.WithContext(ctx).Model(&record{}).Where("kind = ? AND payment_id = ?", kindRefund, id).Count(&n).Error
	return n, err
}

func (s *Simulator) find(ctx context.Context, kind, key string) (record, error) {
	var r record
	err := s.db.WithContext(ctx).Where("kind = ? AND record_key = ?", kind, key).Take(&r).Error
	return r, err
}

// newTxnID returns a gateway reference like "sim_3f9a0c1b2d4e5f60".
func newTxnID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return "sim_" + hex.EncodeToString(b)
}

// Migrations create sim_gateway_records: the simulator's memory, in the
// service's database (a real gateway keeps its own).
func Migrations() []db.Migration {
	return []db.Migration{{
		ID: "payment_sim_0001_gateway_records",
		Up: db.SQL(
			[]string{`CREATE TABLE IF NOT EXISTS sim_gateway_records (
  id BIGINT NOT NULL AUTO_INCREMENT,
  kind VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  record_key VARCHAR(190) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  payment_id BIGINT NOT NULL,
  status VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  gateway_txn_id VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  amount_cents BIGINT NOT NULL,
  currency CHAR(3) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  created_at DATETIME(6) NOT NULL,
  updated_at DATETIME(6) NOT NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uq_sim_gateway_records_key (kind, record_key),
  KEY idx_sim_gateway_records_payment (payment_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci`},
			[]string{
				`CREATE TABLE IF NOT EXISTS sim_gateway_records (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  kind TEXT NOT NULL,
  record_key TEXT NOT NULL,
  payment_id INTEGER NOT NULL,
  status TEXT NOT NULL,
  gateway_txn_id TEXT NOT NULL,
  amount_cents INTEGER NOT NULL,
  currency TEXT NOT NULL,
  created_at DATETIME NOT NULL,
  updated_at DATETIME NOT NULL)`,
				`CREATE UNIQUE INDEX IF NOT EXISTS uq_sim_gateway_records_key ON sim_gateway_records (kind, record_key)`,
				`CREATE INDEX IF NOT EXISTS idx_sim_gateway_records_payment ON sim_gateway_records (payment_id)`,
			},
		),
	}}
}
