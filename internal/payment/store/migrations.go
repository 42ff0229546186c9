package store

import "github.com/onceonly/onceonly/internal/platform/db"

// Migrations create the payment service's own tables (the outbox and the
// lock's job_fences come from their packages; the simulator's from
// internal/payment/gateway). Each is one statement per dialect, or IF NOT
// EXISTS, so a partly applied run can simply run again.
//
// Columns compared with client input — order_id, user_id, status, currency
// — are ASCII with a binary collation on MySQL, so "o-1" and "O-1" are two
// orders, as they are on SQLite.
//
// Indexes: UNIQUE(order_id, attempt) is what makes creation race-safe (one
// row per attempt, whatever the callers read); it also serves "the order's
// latest attempt". (updated_at, id) serves reconciliation's keyset over a
// time window; (status, updated_at) its search for PENDING payments past
// the grace period. refund_key is UNIQUE: one refund key, one payment.
func Migrations() []db.Migration {
	return []db.Migration{
		{
			ID: "payment_0001_payments",
			Up: db.SQL(
				[]string{`CREATE TABLE IF NOT EXISTS payments (
  id BIGINT NOT NULL AUTO_INCREMENT,
  order_id VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  user_id VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  attempt INT NOT NULL,
  status VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  amount_cents BIGINT NOT NULL,
  currency CHAR(3) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  gateway_txn_id VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
  refund_key VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NULL,
  version BIGINT NOT NULL DEFAULT 1,
  created_at DATETIME(6) NOT NULL,
  updated_at DATETIME(6) NOT NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uq_payments_order_attempt (order_id, attempt),
  UNIQUE KEY uq_payments_refund_key (refund_key),
  KEY idx_payments_updated (updated_at, id),
  KEY idx_payments_status_updated (status, updated_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci`},
				[]string{
					`CREATE TABLE IF NOT EXISTS payments (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  order_id TEXT NOT NULL,
  user_id TEXT NOT NULL,
  attempt INTEGER NOT NULL,
  status TEXT NOT NULL,
  amount_cents INTEGER NOT NULL,
  currency TEXT NOT NULL,
  gateway_txn_id TEXT NULL,
  refund_key TEXT NULL,
  version INTEGER NOT NULL DEFAULT 1,
  created_at DATETIME NOT NULL,
  updated_at DATETIME NOT NULL)`,
					`CREATE UNIQUE INDEX IF NOT EXISTS uq_payments_order_attempt ON payments (order_id, attempt)`,
					`CREATE UNIQUE INDEX IF NOT EXISTS uq_payments_refund_key ON payments (refund_key)`,
					`CREATE INDEX IF NOT EXISTS idx_payments_updated ON payments (updated_at, id)`,
					`CREATE INDEX IF NOT EXISTS idx_payments_status_updated ON payments (status, updated_at)`,
				},
			),
		},
		{
			// Callbacks that changed nothing but must not be lost: amount
			// mismatches (422) and contradicting statuses (200 conflict), with
			// the raw body byte for byte.
			ID: "payment_0002_callback_records",
			Up: db.SQL(
				[]string{`CREATE TABLE IF NOT EXISTS callback_records (
  id BIGINT NOT NULL AUTO_INCREMENT,
  kind VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  payment_id BIGINT NOT NULL,
  status VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  request_id VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '',
  raw_body MEDIUMBLOB NOT NULL,
  received_at DATETIME(6) NOT NULL,
  PRIMARY KEY (id),
  KEY idx_callback_records_payment (payment_id, id),
  KEY idx_callback_records_received (received_at, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci`},
				[]string{
					`CREATE TABLE IF NOT EXISTS callback_records (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  kind TEXT NOT NULL,
  payment_id INTEGER NOT NULL,
  status TEXT NOT NULL,
  request_id TEXT NOT NULL DEFAULT '',
  raw_body BLOB NOT NULL,
  received_at DATETIME NOT NULL)`,
					`CREATE INDEX IF NOT EXISTS idx_callback_records_payment ON callback_records (payment_id, id)`,
					`CREATE INDEX IF NOT EXISTS idx_callback_records_received ON callback_records (received_at, id)`,
				},
			),
		},
	}
}
