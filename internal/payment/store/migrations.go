package store

import (
	"gorm.io/gorm"

	"github.com/onceonly/onceonly/internal/platform/db"
)

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
//
// payments.event_id (0003) is the event of the transition into the current
// status; reconciliation_runs and reconciliation_diffs (0004) are the
// reconciliation reports (internal/payment/reconcile): one row per run, at
// most reconcile.MaxDiffs diff rows per run, read newest first by id.
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
		{
			// The event of the transition into the current status: what
			// reconciliation re-drives (or rebuilds, if the outbox row was
			// pruned) with its original id. A column added to an existing
			// table: checked first, because MySQL 8 has no ADD COLUMN IF NOT
			// EXISTS and its DDL commits on its own.
			ID: "payment_0003_payments_event_id",
			Up: func(tx *gorm.DB, d db.Dialect) error {
				return addColumn(tx, d, "payments", "event_id",
					"ALTER TABLE payments ADD COLUMN event_id VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL",
					"ALTER TABLE payments ADD COLUMN event_id TEXT NULL")
			},
		},
		{
			ID: "payment_0004_reconciliation",
			Up: db.SQL(
				[]string{`CREATE TABLE IF NOT EXISTS reconciliation_runs (
  id BIGINT NOT NULL AUTO_INCREMENT,
  status VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  error VARCHAR(1000) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
  window_start DATETIME(6) NOT NULL,
  window_end DATETIME(6) NOT NULL,
  started_at DATETIME(6) NOT NULL,
  finished_at DATETIME(6) NOT NULL,
  checked BIGINT NOT NULL,
  matched BIGINT NOT NULL,
  republished BIGINT NOT NULL,
  queried BIGINT NOT NULL,
  refunded BIGINT NOT NULL,
  flagged BIGINT NOT NULL,
  diffs_total BIGINT NOT NULL,
  fence_token BIGINT NOT NULL,
  PRIMARY KEY (id),
  KEY idx_reconciliation_runs_started (started_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci`,
					`CREATE TABLE IF NOT EXISTS reconciliation_diffs (
  id BIGINT NOT NULL AUTO_INCREMENT,
  run_id BIGINT NOT NULL,
  kind VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  payment_id BIGINT NULL,
  order_id VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  action VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  PRIMARY KEY (id),
  KEY idx_reconciliation_diffs_run (run_id, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci`},
				[]string{
					`CREATE TABLE IF NOT EXISTS reconciliation_runs (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  status TEXT NOT NULL,
  error TEXT NULL,
  window_start DATETIME NOT NULL,
  window_end DATETIME NOT NULL,
  started_at DATETIME NOT NULL,
  finished_at DATETIME NOT NULL,
  checked INTEGER NOT NULL,
  matched INTEGER NOT NULL,
  republished INTEGER NOT NULL,
  queried INTEGER NOT NULL,
  refunded INTEGER NOT NULL,
  flagged INTEGER NOT NULL,
  diffs_total INTEGER NOT NULL,
  fence_token INTEGER NOT NULL)`,
					`CREATE INDEX IF NOT EXISTS idx_reconciliation_runs_started ON reconciliation_runs (started_at)`,
					`CREATE TABLE IF NOT EXISTS reconciliation_diffs (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  run_id INTEGER NOT NULL,
  kind TEXT NOT NULL,
  payment_id INTEGER NULL,
  order_id TEXT NOT NULL,
  action TEXT NOT NULL)`,
					`CREATE INDEX IF NOT EXISTS idx_reconciliation_diffs_run ON reconciliation_diffs (run_id, id)`,
				},
			),
		},
	}
}

// addColumn runs the dialect's ALTER unless table already has column.
func addColumn(tx *gorm.DB, d db.Dialect, table, column, mysql, sqlite string) error {
	var n int64
	q := "SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND COLUMN_NAME = ?"
	stmt := mysql
	if d == db.SQLite {
		q = "SELECT COUNT(*) FROM pragma_table_info(?) WHERE name = ?"
		stmt = sqlite
	}
	if err := tx.Raw(q, table, column).Scan(&n).Error; err != nil {
		return err
	}
	if n > 0 {
		return nil
	}
	return tx.Exec(stmt).Error
}
