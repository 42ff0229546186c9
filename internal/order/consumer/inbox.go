package consumer

import (
	"fmt"

	"gorm.io/gorm"

	"github.com/onceonly/onceonly/internal/platform/db"
)

// Outcomes: what consuming an event did. The first four are stored in
// consumed_events.outcome; all five are values of
// onceonly_order_events_consumed_total{outcome}.
const (
	// OutcomeApplied: payment.succeeded moved the order PENDING_PAYMENT → PAID.
	OutcomeApplied = "applied"
	// OutcomeRecorded: payment.failed or payment.refunded; the order is as it was.
	OutcomeRecorded = "recorded"
	// OutcomeLate: payment.succeeded for an order that is already CANCELLED
	// (or PAID by another payment): not applied; reconciliation refunds the
	// payment. Find them with WHERE outcome = 'late'.
	OutcomeLate = "late"
	// OutcomeDuplicate: the event was consumed before (same event_id: no new
	// row, consumed_events.deliveries grows), or it is a payment.succeeded
	// under a new event_id for an order already PAID by that very payment
	// (a re-driven event: a row with this outcome, no second transition).
	OutcomeDuplicate = "duplicate"
	// OutcomeDeadLettered: poison, copied to the DLQ; never in consumed_events.
	OutcomeDeadLettered = "dead_lettered"
)

var outcomes = []string{OutcomeApplied, OutcomeRecorded, OutcomeLate, OutcomeDuplicate, OutcomeDeadLettered}

// Migrations create consumed_events, the consumer's dedup table: one row per
// event_id ever consumed (UNIQUE), with where it was read and what it did.
// Append them to the order service's migrations: the table must live in the
// orders database, since its INSERT commits with the order's UPDATE.
// (outcome, consumed_at) lets reconciliation find the late events.
func Migrations() []db.Migration {
	return []db.Migration{{
		ID: "order_0002_consumed_events",
		Up: db.SQL(
			[]string{`CREATE TABLE IF NOT EXISTS consumed_events (
  id BIGINT NOT NULL AUTO_INCREMENT,
  event_id VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  event_type VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  order_id BIGINT NOT NULL,
  payment_id VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  topic VARCHAR(249) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  source_partition INT NOT NULL,
  source_offset BIGINT NOT NULL,
  outcome VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  deliveries INT NOT NULL DEFAULT 1,
  consumed_at DATETIME(6) NOT NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uq_consumed_events_event_id (event_id),
  KEY idx_consumed_events_order (order_id),
  KEY idx_consumed_events_outcome (outcome, consumed_at)
) ENGINE=InnoDB`},
			[]string{`CREATE TABLE IF NOT EXISTS consumed_events (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  event_id TEXT NOT NULL,
  event_type TEXT NOT NULL,
  order_id INTEGER NOT NULL,
  payment_id TEXT NOT NULL,
  topic TEXT NOT NULL,
  source_partition INTEGER NOT NULL,
  source_offset INTEGER NOT NULL,
  outcome TEXT NOT NULL,
  deliveries INTEGER NOT NULL DEFAULT 1,
  consumed_at DATETIME NOT NULL)`,
				`CREATE UNIQUE INDEX IF NOT EXISTS uq_consumed_events_event_id ON consumed_events (event_id)`,
				`CREATE INDEX IF NOT EXISTS idx_consumed_events_order ON consumed_events (order_id)`,
				`CREATE INDEX IF NOT EXISTS idx_consumed_events_outcome ON consumed_events (outcome, consumed_at)`,
			},
		),
	}}
}

// claimSQL inserts the event's row; the UNIQUE index on event_id decides
// whether it is the first. A plain INSERT, on purpose: InnoDB checks a
// unique secondary index for INSERT … ON DUPLICATE KEY UPDATE (and INSERT
// IGNORE, REPLACE) with next-key locks even when there is no duplicate, so
// concurrent batches of random event ids deadlock on each other's gaps; a
// plain INSERT takes only an insert-intention lock unless the key exists.
const claimSQL = `INSERT INTO consumed_events
  (event_id, event_type, order_id, payment_id, topic, source_partition, source_offset, outcome, deliveries, consumed_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

// claim records e in consumed_events with its outcome and deliveries (its
// copies in the batch), inside tx. fresh is false when its event_id is there
// already — another member committed it after this batch's consumedBefore
// read (or, on SQLite, in any earlier batch): the event is done, the
// deliveries are counted, and it must be skipped. If that member's insert is
// still uncommitted, the INSERT waits for it and then inserts (it rolled
// back) or finds the duplicate (it committed).
//
// A duplicate-key error rolls back only the failing statement on MySQL,
// MariaDB and SQLite, so the batch's transaction carries on. (PostgreSQL
// aborts the whole transaction: there use INSERT … ON CONFLICT DO NOTHING
// and check the row count, or a SAVEPOINT around the insert.)
func claim(tx *gorm.DB, e paymentEvent, outcome string, deliveries int) (fresh bool, err error) {
	err = tx.Exec(claimSQL, e.EventID, e.Type, e.orderID, e.PaymentID, e.msg.Topic, e.msg.Partition, e.msg.Offset,
		outcome, deliveries, db.Now()).Error
	switch {
	case err == nil:
		return true, nil
	case db.IsDuplicate(err):
		// By the unique key: this path is rare (a race), so its gap lock is too.
		if err := tx.Exec("UPDATE consumed_events SET deliveries = deliveries + ? WHERE event_id = ?", deliveries, e.EventID).Error; err != nil {
			return false, fmt.Errorf("consumer: count deliveries of %s: %w", e.EventID, err)
		}
		return false, nil
	}
	return false, fmt.Errorf("consumer: claim event %s: %w", e.EventID, err)
}

// consumedBefore returns which of ids consumed_events already holds, by
// event_id → row id, with a plain (non-locking) read. The common duplicate
// — a redelivery of a committed batch, a second copy on the topic — is then
// skipped without touching the unique index's locks; one committed after
// this read is still caught by the claim.
func consumedBefore(tx *gorm.DB, ids []string) (map[string]int64, error) {
	var rows []struct {
		ID      int64
		EventID string
	}
	if err := tx.Raw("SELECT id, event_id FROM consumed_events WHERE event_id IN ?", ids).Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("consumer: look up consumed events: %w", err)
	}
	found := make(map[string]int64, len(rows))
	for _, r := range rows {
		found[r.EventID] = r.ID
	}
	return found, nil
}

// addDeliveries counts n more deliveries of a consumed event, by primary
// key: MariaDB locks that row only, where an UPDATE by the unique event_id
// would also lock the gap before it and block other batches' inserts.
func addDeliveries(tx *gorm.DB, row int64, n int) error {
	if err := tx.Exec("UPDATE consumed_events SET deliveries = deliveries + ? WHERE id = ?", n, row).Error; err != nil {
		return fmt.Errorf("consumer: count deliveries of row %d: %w", row, err)
	}
	return nil
}
