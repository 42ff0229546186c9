package outbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"unicode/utf8"

	"gorm.io/gorm"

	"github.com/onceonly/onceonly/internal/platform/db"
)

// Column widths; Add rejects longer values instead of letting MySQL truncate
// them (or SQLite accept what MySQL would refuse).
const (
	maxEventID = 128
	maxTopic   = 249 // Kafka's own limit
	maxKey     = 255
	maxError   = 1000
)

var (
	// ErrNotInTransaction is returned by Add when tx is not inside a
	// transaction: an event written outside the business transaction could
	// commit without the business row (or the reverse), which is exactly what
	// the outbox exists to prevent.
	ErrNotInTransaction = errors.New("outbox: Add must run inside the caller's transaction")
	// ErrInvalidMessage is returned (wrapped, naming the field) by Add for a
	// Message without EventID or Topic, or with a field too long for its column.
	ErrInvalidMessage = errors.New("outbox: invalid message")
)

// Message is one event to publish. The relay sends it to Topic with Key as
// the Kafka key (one key's events stay in one partition, in id order),
// Payload as the value and Headers as record headers.
type Message struct {
	// EventID identifies the event for ever (consumers de-duplicate on it);
	// required, unique in the table, at most 128 bytes. It is also sent as the
	// "event_id" header.
	EventID string
	// Topic is the Kafka topic; required.
	Topic string
	// Key is the partition key (the order id). Events with the same key are
	// published in the order of their row ids; an empty key sends the record
	// without a key (any partition, no order promised).
	Key string
	// Payload is the record value, sent as is (nil: a null value).
	Payload []byte
	// Headers become record headers (e.g. event_id, type, request_id).
	// "event_id" is set to EventID when absent; a different value is refused.
	Headers map[string]string
}

// Migrations creates outbox_events. Append them to the service's own
// migrations: the table must live in the database the business rows are in,
// or Add cannot share their transaction. The index on (published_at, id)
// serves both the relay's "published_at IS NULL ORDER BY id" (the NULL range
// is already in id order, so no sort) and the pruning range
// "published_at < cutoff".
func Migrations() []db.Migration {
	return []db.Migration{{
		ID: "outbox_0001_outbox_events",
		Up: db.SQL(
			[]string{
				// event_id and topic compare byte-wise: under the database's
				// case-insensitive collation "A" and "a" would be one event.
				`CREATE TABLE IF NOT EXISTS outbox_events (
					id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
					event_id VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
					topic VARCHAR(249) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
					msg_key VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT '',
					payload MEDIUMBLOB NULL,
					headers TEXT NOT NULL,
					created_at DATETIME(6) NOT NULL,
					published_at DATETIME(6) NULL,
					attempts INT NOT NULL DEFAULT 0,
					last_error VARCHAR(1000) NULL,
					UNIQUE KEY uq_outbox_events_event_id (event_id),
					KEY idx_outbox_events_published (published_at, id)
				) ENGINE=InnoDB`,
			},
			[]string{
				// AUTOINCREMENT: SQLite would otherwise reuse the id of a
				// pruned last row, and ids must only grow.
				`CREATE TABLE IF NOT EXISTS outbox_events (
					id INTEGER PRIMARY KEY AUTOINCREMENT,
					event_id TEXT NOT NULL,
					topic TEXT NOT NULL,
					msg_key TEXT NOT NULL DEFAULT '',
					payload BLOB NULL,
					headers TEXT NOT NULL,
					created_at DATETIME NOT NULL,
					published_at DATETIME NULL,
					attempts INTEGER NOT NULL DEFAULT 0,
					last_error TEXT NULL
				)`,
				`CREATE UNIQUE INDEX IF NOT EXISTS uq_outbox_events_event_id ON outbox_events (event_id)`,
				`CREATE INDEX IF NOT EXISTS idx_outbox_events_published ON outbox_events (published_at, id)`,
			},
		),
	}}
}

// Add writes m into the outbox inside tx, the caller's transaction, so the
// event commits if and only if the business change does. It returns
// ErrNotInTransaction when tx is not a transaction (nothing is written),
// ErrInvalidMessage (wrapped) for a malformed m, gorm.ErrDuplicatedKey
// (wrapped; test with errors.Is) when m.EventID is already in the table, or
// the database's error. After the commit, call Relay.Notify to publish at
// once instead of at the next poll.
func Add(tx *gorm.DB, m Message) error {
	if !inTransaction(tx) {
		return ErrNotInTransaction
	}
	headers, err := encodeHeaders(m)
	if err != nil {
		return err
	}
	err = tx.Exec(`INSERT INTO outbox_events (event_id, topic, msg_key, payload, headers, created_at, attempts)
		VALUES (?, ?, ?, ?, ?, ?, 0)`, m.EventID, m.Topic, m.Key, m.Payload, headers, db.Now()).Error
	if err != nil {
		return fmt.Errorf("outbox: add %s: %w", m.EventID, err)
	}
	return nil
}

// Redrive makes an existing event unpublished again (same row, same
// event_id), so the relay publishes it once more: reconciliation's answer to
// an event the consumer never applied. It reports false when no row has
// eventID (never added, or already pruned: re-add it then with the same
// EventID). It works inside or outside a transaction; inside a fenced job
// pass the fenced tx. The event goes out with the next round in the order of
// its original id, so it may follow newer events of its key: consumers see
// it as a late duplicate or a late first delivery, which their event_id
// de-duplication and state machines must accept.
func Redrive(tx *gorm.DB, eventID string) (bool, error) {
	if tx == nil {
		return false, errors.New("outbox: Redrive on a nil *gorm.DB")
	}
	// attempts is reset so that a redriven row's counters describe its new
	// delivery; the change also keeps MySQL's rows-affected honest for an
	// already published row (published_at changes from a value to NULL).
	res := tx.Exec(`UPDATE outbox_events SET published_at = NULL, attempts = 0, last_error = NULL
		WHERE event_id = ?`, eventID)
	if res.Error != nil {
		return false, fmt.Errorf("outbox: redrive %s: %w", eventID, res.Error)
	}
	if res.RowsAffected > 0 {
		return true, nil
	}
	// MySQL counts rows changed: a row that was already unpublished with no
	// attempts matched but changed nothing. It exists, so it will be sent.
	var n int64
	if err := tx.Raw("SELECT COUNT(*) FROM outbox_events WHERE event_id = ?", eventID).Scan(&n).Error; err != nil {
		return false, fmt.Errorf("outbox: redrive %s: %w", eventID, err)
	}
	return n > 0, nil
}

// inTransaction is gorm's own test (DB.Commit): inside Transaction or after
// Begin, the statement's connection pool is a *sql.Tx (or a prepared-statement
// wrapper of one), which commits; a plain *gorm.DB holds the *sql.DB.
func inTransaction(tx *gorm.DB) bool {
	if tx == nil || tx.Statement == nil {
		return false
	}
	c, ok := tx.Statement.ConnPool.(gorm.TxCommitter)
	if !ok || c == nil {
		return false
	}
	v := reflect.ValueOf(c)
	return !(v.Kind() == reflect.Pointer && v.IsNil())
}

func encodeHeaders(m Message) (string, error) {
	switch {
	case m.EventID == "" || len(m.EventID) > maxEventID || !utf8.ValidString(m.EventID):
		return "", fmt.Errorf("%w: EventID must be 1 to %d bytes of UTF-8", ErrInvalidMessage, maxEventID)
	case m.Topic == "" || len(m.Topic) > maxTopic:
		return "", fmt.Errorf("%w: Topic must be 1 to %d bytes", ErrInvalidMessage, maxTopic)
	case len(m.Key) > maxKey || !utf8.ValidString(m.Key):
		return "", fmt.Errorf("%w: Key must be at most %d bytes of UTF-8", ErrInvalidMessage, maxKey)
	}
	h := make(map[string]string, len(m.Headers)+1)
	for k, v := range m.Headers {
		h[k] = v
	}
	if v, ok := h[HeaderEventID]; ok && v != m.EventID {
		return "", fmt.Errorf("%w: header %s %q differs from EventID %q", ErrInvalidMessage, HeaderEventID, v, m.EventID)
	}
	h[HeaderEventID] = m.EventID
	b, err := json.Marshal(h)
	if err != nil {
		return "", fmt.Errorf("%w: headers: %v", ErrInvalidMessage, err)
	}
	return string(b), nil
}

// HeaderEventID is the record header that carries Message.EventID.
const HeaderEventID = "event_id"
