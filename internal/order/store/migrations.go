package store

import "github.com/onceonly/onceonly/internal/platform/db"

// Migrations create the order service's schema. Each is one statement per
// dialect (or IF NOT EXISTS), so a partly applied run can simply run again.
//
// Columns compared with client input — user_id, submit_token — are ASCII
// with a binary collation on MySQL: under the database's case-insensitive
// default "alice" would see "Alice"'s orders, and a lower-cased token would
// replay an upper-case one's order. SQLite compares TEXT bytewise already.
//
// Indexes: submit_token UNIQUE is the submit backstop; (user_id, id) serves
// the user's keyset listing; (status, created_at) the timeout closer;
// (status, updated_at) reconciliation's listing. InnoDB appends the primary
// key to each, so the keyset tiebreak on id is covered.
func Migrations() []db.Migration {
	return []db.Migration{{
		ID: "order_0001_orders",
		Up: db.SQL(
			[]string{`CREATE TABLE IF NOT EXISTS orders (
  id BIGINT NOT NULL AUTO_INCREMENT,
  user_id VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  status VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  amount_cents BIGINT NOT NULL,
  currency CHAR(3) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  items TEXT NOT NULL,
  payment_id VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NULL,
  submit_token VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  body_hash CHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  version BIGINT NOT NULL DEFAULT 1,
  created_at DATETIME(6) NOT NULL,
  updated_at DATETIME(6) NOT NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uq_orders_submit_token (submit_token),
  KEY idx_orders_user_id (user_id, id),
  KEY idx_orders_status_created (status, created_at),
  KEY idx_orders_status_updated (status, updated_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci`},
			[]string{
				`CREATE TABLE IF NOT EXISTS orders (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  user_id TEXT NOT NULL,
  status TEXT NOT NULL,
  amount_cents INTEGER NOT NULL,
  currency TEXT NOT NULL,
  items TEXT NOT NULL,
  payment_id TEXT NULL,
  submit_token TEXT NOT NULL,
  body_hash TEXT NOT NULL,
  version INTEGER NOT NULL DEFAULT 1,
  created_at DATETIME NOT NULL,
  updated_at DATETIME NOT NULL)`,
				`CREATE UNIQUE INDEX IF NOT EXISTS uq_orders_submit_token ON orders (submit_token)`,
				`CREATE INDEX IF NOT EXISTS idx_orders_user_id ON orders (user_id, id)`,
				`CREATE INDEX IF NOT EXISTS idx_orders_status_created ON orders (status, created_at)`,
				`CREATE INDEX IF NOT EXISTS idx_orders_status_updated ON orders (status, updated_at)`,
			},
		),
	}}
}
