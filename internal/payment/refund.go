package payment

import (
	"fmt"
	"time"

	"github.com/onceonly/onceonly/internal/payment/events"
)

// RefundKeyOf is the idempotency key of p's refund at the gateway. It is
// derived from the payment row alone (its id and creation time), never
// drawn at random: a refund retried after a crash between the gateway call
// and the SUCCEEDED → REFUNDED transition, or made by a second
// reconciliation instance that still believed it held the lock, sends the
// same key, and the gateway refunds once. (The fence cannot guard a call
// outside the database; the key is what makes it safe to repeat.) The
// creation time keeps keys apart should payment ids ever be reused, e.g. a
// database rebuilt against the same gateway account.
func RefundKeyOf(p Payment) string {
	return fmt.Sprintf("refund-%d-%d", p.ID, p.CreatedAt.UnixMicro())
}

// EventOf is the event of p's transition to `to` at `at`, with id eventID:
// payment.succeeded, payment.failed or payment.refunded. Reconciliation
// rebuilds a pruned event with it from the payment row (EventOf(p,
// p.Status, p.UpdatedAt, p.EventID)), so the rebuilt event is the original
// one, field for field.
func EventOf(p Payment, to Status, at time.Time, eventID string) events.Event {
	typ := events.TypeSucceeded
	switch to {
	case Failed:
		typ = events.TypeFailed
	case Refunded:
		typ = events.TypeRefunded
	}
	return events.Event{
		SchemaVersion: events.SchemaVersion, EventID: eventID, Type: typ,
		PaymentID: FormatID(p.ID), OrderID: p.OrderID, AmountCents: p.AmountCents, Currency: p.Currency,
		OccurredAt: at.UTC(),
	}
}
