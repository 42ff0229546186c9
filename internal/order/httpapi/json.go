package httpapi

import (
	"time"

	"github.com/onceonly/onceonly/internal/order"
)

// Wire shapes. Field order and names are the contract (DESIGN.md): ids are
// strings, money is integer minor units, times are RFC 3339 in UTC, and
// payment_id is null until a payment is attached.

type itemJSON struct {
	SKU        string `json:"sku"`
	Quantity   int64  `json:"quantity"`
	PriceCents int64  `json:"price_cents"`
}

// submitBody is POST /v1/orders' body. Unknown fields are refused by
// httpx.BindJSON.
type submitBody struct {
	Currency string     `json:"currency"`
	Items    []itemJSON `json:"items"`
}

func (b submitBody) toDomain() order.NewOrder {
	n := order.NewOrder{Currency: b.Currency, Items: make([]order.Item, len(b.Items))}
	for i, it := range b.Items {
		n.Items[i] = order.Item(it)
	}
	return n
}

type orderJSON struct {
	ID          string     `json:"id"`
	UserID      string     `json:"user_id"`
	Status      string     `json:"status"`
	AmountCents int64      `json:"amount_cents"`
	Currency    string     `json:"currency"`
	Items       []itemJSON `json:"items"`
	PaymentID   *string    `json:"payment_id"`
	Version     int64      `json:"version"`
	CreatedAt   string     `json:"created_at"`
	UpdatedAt   string     `json:"updated_at"`
}

func toJSON(o order.Order) orderJSON {
	items := make([]itemJSON, len(o.Items))
	for i, it := range o.Items {
		items[i] = itemJSON(it)
	}
	return orderJSON{
		ID: order.FormatID(o.ID), UserID: o.UserID, Status: string(o.Status), AmountCents: o.AmountCents,
		Currency: o.Currency, Items: items, PaymentID: paymentID(o), Version: o.Version,
		CreatedAt: timeJSON(o.CreatedAt), UpdatedAt: timeJSON(o.UpdatedAt),
	}
}

// payJSON is POST /v1/orders/{id}/pay's answer: the order's payment.
type payJSON struct {
	PaymentID   string `json:"payment_id"`
	OrderID     string `json:"order_id"`
	Status      string `json:"status"`
	AmountCents int64  `json:"amount_cents"`
	Currency    string `json:"currency"`
}

type listJSON struct {
	Orders     []orderJSON `json:"orders"`
	NextCursor *string     `json:"next_cursor"`
}

// internalJSON is the shape reconciliation reads.
type internalJSON struct {
	ID          string  `json:"id"`
	Status      string  `json:"status"`
	PaymentID   *string `json:"payment_id"`
	AmountCents int64   `json:"amount_cents"`
	Currency    string  `json:"currency"`
	UpdatedAt   string  `json:"updated_at"`
}

func toInternalJSON(o order.Order) internalJSON {
	return internalJSON{ID: order.FormatID(o.ID), Status: string(o.Status), PaymentID: paymentID(o),
		AmountCents: o.AmountCents, Currency: o.Currency, UpdatedAt: timeJSON(o.UpdatedAt)}
}

type internalListJSON struct {
	Orders     []internalJSON `json:"orders"`
	NextCursor *string        `json:"next_cursor"`
}

type batchJSON struct {
	Orders []internalJSON `json:"orders"`
}

type tokenJSON struct {
	Token     string `json:"token"`
	ExpiresAt string `json:"expires_at"`
}

func paymentID(o order.Order) *string {
	if o.PaymentID == "" {
		return nil
	}
	id := o.PaymentID
	return &id
}

func cursor(c string) *string {
	if c == "" {
		return nil
	}
	return &c
}

// timeJSON keeps the microseconds the database stores, so a client can page
// the internal listing from an updated_at it was given.
func timeJSON(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
