package httpapi

import (
	"time"

	"github.com/onceonly/onceonly/internal/payment"
)

// Wire shapes. Field order and names are the contract (DESIGN.md): ids are
// strings, money is integer minor units, times are RFC 3339 in UTC, and
// gateway_txn_id is null until the gateway has reported.

// createBody is POST /v1/payments' body. Unknown fields are refused by
// httpx.BindJSON.
type createBody struct {
	OrderID     string `json:"order_id"`
	UserID      string `json:"user_id"`
	AmountCents int64  `json:"amount_cents"`
	Currency    string `json:"currency"`
}

func (b createBody) toDomain() payment.NewPayment {
	return payment.NewPayment(b)
}

// callbackBody is the gateway's notification. Decoded leniently: unknown
// fields are ignored (gateways add fields, and a 400 would be retried for
// ever), types are strict, and pointers tell a missing field from a zero.
type callbackBody struct {
	PaymentID    *string `json:"payment_id"`
	GatewayTxnID *string `json:"gateway_txn_id"`
	Status       *string `json:"status"`
	AmountCents  *int64  `json:"amount_cents"`
	Currency     *string `json:"currency"`
}

type paymentJSON struct {
	ID           string  `json:"id"`
	OrderID      string  `json:"order_id"`
	Attempt      int     `json:"attempt"`
	Status       string  `json:"status"`
	AmountCents  int64   `json:"amount_cents"`
	Currency     string  `json:"currency"`
	GatewayTxnID *string `json:"gateway_txn_id"`
	CreatedAt    string  `json:"created_at"`
	UpdatedAt    string  `json:"updated_at"`
}

func toJSON(p payment.Payment) paymentJSON {
	var txn *string
	if p.GatewayTxnID != "" {
		t := p.GatewayTxnID
		txn = &t
	}
	return paymentJSON{
		ID: payment.FormatID(p.ID), OrderID: p.OrderID, Attempt: p.Attempt, Status: string(p.Status),
		AmountCents: p.AmountCents, Currency: p.Currency, GatewayTxnID: txn,
		CreatedAt: timeJSON(p.CreatedAt), UpdatedAt: timeJSON(p.UpdatedAt),
	}
}

type resultJSON struct {
	Result payment.Result `json:"result"`
}

// timeJSON keeps the microseconds the database stores.
func timeJSON(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
