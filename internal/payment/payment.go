package payment

import (
	"time"

	"github.com/onceonly/onceonly/internal/platform/ids"
)

// Status is a payment's state. The values are part of the API, the events
// and the stored rows: never rename one.
type Status string

// The payment states (DESIGN.md, "payment service").
const (
	Pending   Status = "PENDING"
	Succeeded Status = "SUCCEEDED"
	Failed    Status = "FAILED"
	Refunded  Status = "REFUNDED"
)

// Statuses lists every state, in lifecycle order.
var Statuses = []Status{Pending, Succeeded, Failed, Refunded}

// transitions is the state machine, as data: from → the states it may move
// to. Store implementations refuse any other edge before a statement is sent
// (CanTransition), so no code path can invent one.
//
//	PENDING   → SUCCEEDED  the gateway reports success (callback, or its Query)
//	PENDING   → FAILED     the gateway reports failure
//	SUCCEEDED → REFUNDED   reconciliation refunds a payment whose order was cancelled
//
// FAILED and REFUNDED are terminal. A FAILED payment is followed by a new
// attempt (a new row); a REFUNDED one by nothing.
var transitions = map[Status][]Status{
	Pending:   {Succeeded, Failed},
	Succeeded: {Refunded},
}

// CanTransition reports whether the state machine has the edge from → to.
func CanTransition(from, to Status) bool {
	for _, s := range transitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// Valid reports whether s is one of Statuses.
func (s Status) Valid() bool {
	for _, v := range Statuses {
		if s == v {
			return true
		}
	}
	return false
}

// Live reports whether a payment in s is the order's live payment: one that
// is still to be paid or has been paid. POST /v1/payments returns it again
// instead of making another attempt.
func (s Status) Live() bool { return s == Pending || s == Succeeded }

// Reports says whether a gateway outcome of o agrees with a payment that is
// already in s: a refunded payment had succeeded first, so a late SUCCEEDED
// is a duplicate, not a contradiction.
func (s Status) Reports(o Status) bool {
	switch s {
	case Succeeded, Refunded:
		return o == Succeeded
	case Failed:
		return o == Failed
	}
	return false
}

// Payment is one attempt to pay one order. Only the Store writes it: Create
// once, then Transition.
type Payment struct {
	ID      int64
	OrderID string
	UserID  string
	// Attempt counts the order's payments from 1; (OrderID, Attempt) is
	// unique, which is what makes creation safe under concurrency.
	Attempt     int
	Status      Status
	AmountCents int64
	Currency    string
	// GatewayTxnID is the gateway's reference, set by the transition out of
	// PENDING; "" before (null in JSON).
	GatewayTxnID string
	// RefundKey is the idempotency key of the gateway refund, set by the
	// transition to REFUNDED; "" before.
	RefundKey string
	// EventID is the event_id of the outbox event of the transition into the
	// current status ("" while PENDING, or for rows written before it was
	// recorded). Reconciliation re-drives a lost event by it, and rebuilds
	// the event with it when the outbox row was pruned: consumers
	// de-duplicate on it, so a re-drive is never a second payment.
	EventID string
	// Version starts at 1 and grows by exactly 1 with every transition.
	Version   int64
	CreatedAt time.Time
	UpdatedAt time.Time
}

// FormatID renders a id the way the API shows it (a JSON string).
func FormatID(id int64) string { return ids.Format(id) }

// ParseID parses an id from the API; see ids.Parse for what parses.
func ParseID(s string) (int64, bool) { return ids.Parse(s) }

func clip(s string, n int) string { return ids.Clip(s, n) }
