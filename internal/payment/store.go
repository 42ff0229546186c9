package payment

import (
	"context"
	"errors"
	"time"

	"github.com/onceonly/onceonly/internal/payment/events"
)

// Errors a Store returns; any other error is a failure of the database
// itself (the service answers 503 and nothing was written).
var (
	// ErrNotFound: no such payment (or no payment for the order).
	ErrNotFound = errors.New("payment: not found")
	// ErrDuplicate: Create found a payment with the same (order id, attempt).
	// The UNIQUE index decides this, whatever the caller read before.
	ErrDuplicate = errors.New("payment: attempt already exists")
	// ErrConflict: Transition matched no row — the payment is no longer in the
	// expected state (or does not exist). Nothing changed, no event was added.
	ErrConflict = errors.New("payment: state changed concurrently or transition not applicable")
	// ErrIllegalTransition: the edge is not in the state machine; no
	// statement was sent. A programming error, not a race.
	ErrIllegalTransition = errors.New("payment: transition not in the state machine")
)

// Store keeps payments and what the callback path records. Implementations
// must be safe for concurrent use and must never change a status except
// through Transition.
type Store interface {
	// Create inserts p (its ID zero) with Version 1, CreatedAt = UpdatedAt =
	// now, and sets p.ID and the times. A second payment with the same
	// (OrderID, Attempt) is ErrDuplicate.
	Create(ctx context.Context, p *Payment) error
	// Get returns the payment with id, or ErrNotFound.
	Get(ctx context.Context, id int64) (Payment, error)
	// Latest returns the order's payment with the highest attempt, or
	// ErrNotFound when the order has none.
	Latest(ctx context.Context, orderID string) (Payment, error)
	// Transition moves payment id from → to with one conditional UPDATE
	// (status, version+1, updated_at = ch.At, ch's columns and event_id =
	// ch.Event.EventID together),
	// applied only if the row is still in from, and — in the same
	// transaction — adds ch.Event to the outbox. Either both are committed
	// or neither is. ErrConflict when no row matched (nothing written);
	// ErrIllegalTransition when the edge is not in the state machine.
	Transition(ctx context.Context, id int64, from, to Status, ch Change) error
	// Record keeps a callback that changed nothing but must not be lost: an
	// amount mismatch or a contradicting status.
	Record(ctx context.Context, r CallbackRecord) error
}

// Change is what a Transition writes besides the status and version.
type Change struct {
	// At is the transition's time: updated_at, and the event's occurred_at.
	At time.Time
	// GatewayTxnID, if non-empty, is written to gateway_txn_id.
	GatewayTxnID string
	// RefundKey, if non-empty, is written to refund_key.
	RefundKey string
	// Event, if non-nil, is added to the outbox in the transition's
	// transaction (topic events.Topic, key = its order id).
	Event *events.Event
	// RequestID is the causing request's id, carried as the event's
	// request_id header for tracing.
	RequestID string
}

// Kinds of CallbackRecord.
const (
	RecordMismatch = "mismatch" // amount or currency differ from the payment's: 422
	RecordConflict = "conflict" // the status contradicts the payment's final one: 200 conflict
)

// CallbackRecord is a callback kept for an operator (and reconciliation):
// the raw body as the gateway sent it.
type CallbackRecord struct {
	Kind       string
	PaymentID  int64
	Status     Status // the status the callback claimed
	RequestID  string
	Body       []byte
	ReceivedAt time.Time
}
