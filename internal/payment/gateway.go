package payment

import "context"

// Gateway is the payment service's one way to reach the payment gateway
// (DESIGN.md: PAYMENT_GATEWAY chooses the adapter; internal/payment/gateway
// has the simulator). Implementations must be safe for concurrent use.
//
// Neither call can be fenced by the database (DESIGN.md, technique 3): a
// job that lost its lock may still make them. That is why Query only reads
// and Refund is idempotent on its key.
type Gateway interface {
	// Query returns the gateway's view of p. An Outcome with Status PENDING
	// means the gateway has no outcome yet: the caller changes nothing. A
	// non-nil error means the gateway could not be asked; nothing is known.
	Query(ctx context.Context, p Payment) (Outcome, error)
	// Refund refunds p in full. It is idempotent on refundKey: a second call
	// with the same key (a retry after a timeout, a second instance) refunds
	// nothing more and returns nil. A non-nil error leaves it unknown whether
	// the refund happened; retry with the same key.
	Refund(ctx context.Context, p Payment, refundKey string) error
}

// Outcome is what the gateway knows of a payment.
type Outcome struct {
	// Status is SUCCEEDED, FAILED, or PENDING when the gateway has no outcome.
	Status Status
	// GatewayTxnID is the gateway's reference of the outcome ("" when PENDING).
	GatewayTxnID string
}
