package order

import (
	"context"
	"errors"
)

// Payments is the payment service as the order service needs it
// (adapter: internal/order/paymentclient). Implementations must be safe for
// concurrent use, and may retry: Create is idempotent on the order id (the
// payment service returns the order's live payment again), Get is a read.
type Payments interface {
	// Create returns the order's live payment (PENDING or SUCCEEDED),
	// creating one if there is none or the latest FAILED. created reports
	// that the payment service answered 201 (this call made the attempt)
	// rather than 200. Errors: ErrPaymentMismatch, ErrPaymentRefused,
	// ErrPaymentsUnavailable (wrapped); anything else is a contract failure.
	Create(ctx context.Context, req PaymentRequest) (p Payment, created bool, err error)
	// Get returns payment id. Errors: ErrPaymentNotFound,
	// ErrPaymentsUnavailable (wrapped); anything else is a contract failure.
	Get(ctx context.Context, id string) (Payment, error)
}

// PaymentRequest asks for an order's payment: its owner, amount and currency
// as the order was created with them.
type PaymentRequest struct {
	OrderID     string
	UserID      string
	AmountCents int64
	Currency    string
}

// Payment is the payment service's view of one payment attempt.
type Payment struct {
	ID          string
	OrderID     string
	Status      string // PENDING, SUCCEEDED, FAILED, REFUNDED
	AmountCents int64
	Currency    string
}

// Errors a Payments returns.
var (
	// ErrPaymentsUnavailable: the payment service did not answer, or answered
	// 5xx, on every attempt. Nothing is known about the payment.
	ErrPaymentsUnavailable = errors.New("order: payment service unavailable")
	// ErrPaymentMismatch: the order already has a live payment for another
	// amount or currency (the payment service's 409 payment_mismatch).
	ErrPaymentMismatch = errors.New("order: the order's live payment differs in amount or currency")
	// ErrPaymentRefused: the payment service makes no new attempt (its 409
	// invalid_transition: the order's payment was refunded).
	ErrPaymentRefused = errors.New("order: the payment service refuses a new attempt")
	// ErrPaymentNotFound: no payment with that id.
	ErrPaymentNotFound = errors.New("order: payment not found")
)
