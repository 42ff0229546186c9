package reconcile

import (
	"context"
	"time"
)

// Order states as the order service reports them (DESIGN.md, "order
// service"). Anything else is answered by a flag, never by a repair.
const (
	OrderPendingPayment = "PENDING_PAYMENT"
	OrderPaid           = "PAID"
	OrderCancelled      = "CANCELLED"
)

// MaxBatch is the most ids one Orders.BatchGet may carry and the most
// orders one ListPaid page may hold: the order service's own bound, and
// reconciliation's page size.
const MaxBatch = 500

// Order is the order service's internal view of an order: what
// reconciliation compares a payment with.
type Order struct {
	ID string
	// Status is PENDING_PAYMENT, PAID or CANCELLED.
	Status string
	// PaymentID is the payment the order names ("" for none). Informational:
	// pairs are made by order id, the payment's own reference.
	PaymentID   string
	AmountCents int64
	Currency    string
	UpdatedAt   time.Time
}

// OrderPage is one page of the PAID listing. NextCursor is "" on the last
// page.
type OrderPage struct {
	Orders     []Order
	NextCursor string
}

// Orders is the order service as reconciliation needs it (adapter:
// internal/payment/orderclient, over its token-protected internal API).
// Implementations must be safe for concurrent use, bound every call in time
// and retry transient failures a bounded number of times.
//
// An error means nothing is known about any order of the call: the caller
// must not classify (let alone repair) anything on it. Only a successful
// answer is definitive — including the absence of an id from it.
type Orders interface {
	// BatchGet returns the orders among ids (at most MaxBatch) that exist.
	// An id absent from a successful answer has no order.
	BatchGet(ctx context.Context, ids []string) ([]Order, error)
	// ListPaid returns a page of at most limit (≤ MaxBatch) orders in status
	// PAID with from ≤ updated_at ≤ to, by keyset on (updated_at, id);
	// cursor is "" for the first page, else the previous page's NextCursor.
	ListPaid(ctx context.Context, from, to time.Time, cursor string, limit int) (OrderPage, error)
}
