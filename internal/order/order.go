package order

import (
	"time"

	"github.com/onceonly/onceonly/internal/platform/apperr"
	"github.com/onceonly/onceonly/internal/platform/ids"
)

// Status is an order's state. The values are part of the API and stored as
// they are: never rename one.
type Status string

// The order states (DESIGN.md, "order service").
const (
	PendingPayment Status = "PENDING_PAYMENT"
	Paid           Status = "PAID"
	Cancelled      Status = "CANCELLED"
)

// Statuses lists every state, in lifecycle order.
var Statuses = []Status{PendingPayment, Paid, Cancelled}

// transitions is the state machine, as data: from → the states it may move
// to. Anything not listed is refused before a statement is sent (Store
// implementations check CanTransition), so no code path can invent an edge.
//
//	PENDING_PAYMENT → PAID       payment.succeeded consumed
//	PENDING_PAYMENT → CANCELLED  the user cancels, or the timeout closer does
//
// PAID and CANCELLED are terminal: a payment that succeeds for a cancelled
// order leaves it CANCELLED and is refunded.
var transitions = map[Status][]Status{
	PendingPayment: {Paid, Cancelled},
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

// ParseStatus returns the status named by s. An empty s is the zero Status
// ("any"); anything else that is not a state is a 400 invalid_request.
func ParseStatus(s string) (Status, error) {
	st := Status(s)
	if s == "" || st.Valid() {
		return st, nil
	}
	return "", apperr.New(apperr.InvalidRequest,
		"status must be one of PENDING_PAYMENT, PAID, CANCELLED; got %q.", clip(s, 32))
}

// Item is one line of an order. Prices are integer minor units of the
// order's currency.
type Item struct {
	SKU        string
	Quantity   int64
	PriceCents int64
}

// Order is an order as stored. Only the Store writes it, and only through
// Create, Transition and AttachPayment.
type Order struct {
	ID          int64
	UserID      string
	Status      Status
	AmountCents int64
	Currency    string
	Items       []Item
	// PaymentID is the payment service's id once a payment is attached; ""
	// until then (null in JSON).
	PaymentID string
	// SubmitToken is the Idempotency-Key that created the order (unique), and
	// BodyHash the hash of its canonical request: together they let the
	// database answer a replay, or a 422, when Redis has forgotten the token.
	SubmitToken string
	BodyHash    string
	// Version starts at 1 and grows by exactly 1 with every change of the
	// row: each transition, and each payment attached by Pay (a new id only).
	Version   int64
	CreatedAt time.Time
	UpdatedAt time.Time
}

// FormatID renders an id the way the API shows it (a JSON string).
func FormatID(id int64) string { return ids.Format(id) }

// ParseID parses an id from the API; see ids.Parse for what parses.
func ParseID(s string) (int64, bool) { return ids.Parse(s) }

func clip(s string, n int) string { return ids.Clip(s, n) }
