package consumer

import (
	"encoding/json"
	"fmt"

	"github.com/IBM/sarama"

	"github.com/onceonly/onceonly/internal/order"
	"github.com/onceonly/onceonly/internal/payment/events"
	"github.com/onceonly/onceonly/internal/platform/ids"
)

// Reasons a message is dead-lettered: the first word of its "reason"
// header ("unknown_type: …"). They are stable: alerts and replay tools match
// on them.
const (
	ReasonInvalidJSON       = "invalid_json"               // not a JSON object of the event's shape
	ReasonSchemaVersion     = "unsupported_schema_version" // schema_version is not 1
	ReasonUnknownType       = "unknown_type"               // not one of the three payment event types
	ReasonInvalidEventID    = "invalid_event_id"           // missing or not 1–128 of [A-Za-z0-9_.:-]
	ReasonInvalidOrderID    = "invalid_order_id"           // missing or not an order id
	ReasonInvalidPaymentID  = "invalid_payment_id"         // missing or not 1–64 of [A-Za-z0-9_.:-]
	ReasonInvalidAmount     = "invalid_amount"             // amount_cents not positive, or currency malformed
	ReasonUnknownOrder      = "unknown_order"              // no order with that id
	ReasonAmountMismatch    = "amount_mismatch"            // payment.succeeded for another amount or currency than the order's
	maxEventIDLen, maxIDLen = 128, 64                      // consumed_events.event_id, orders.payment_id
)

// paymentEvent is a decoded, valid message.
type paymentEvent struct {
	events.Event
	orderID int64
	msg     *sarama.ConsumerMessage
}

// poison says why a message can never be applied; it becomes the DLQ
// record's reason header.
type poison struct {
	code, detail string
}

func (p *poison) String() string { return p.code + ": " + p.detail }

func poisoned(code, format string, args ...any) *poison {
	return &poison{code: code, detail: fmt.Sprintf(format, args...)}
}

// decode parses and validates msg's value (DESIGN.md, "Kafka"). Unknown
// fields are ignored, so the producer may add fields within schema 1;
// known fields are strictly typed. The result is nil exactly when the
// event can be applied to an order that exists.
func decode(msg *sarama.ConsumerMessage) (paymentEvent, *poison) {
	var e events.Event
	if err := json.Unmarshal(msg.Value, &e); err != nil {
		return paymentEvent{}, poisoned(ReasonInvalidJSON, "%v", err)
	}
	switch {
	case e.SchemaVersion != events.SchemaVersion:
		return paymentEvent{}, poisoned(ReasonSchemaVersion, "schema_version %d; this consumer reads %d", e.SchemaVersion, events.SchemaVersion)
	case e.Type != events.TypeSucceeded && e.Type != events.TypeFailed && e.Type != events.TypeRefunded:
		return paymentEvent{}, poisoned(ReasonUnknownType, "type %q", clip(e.Type))
	case !ids.IsRef(e.EventID, maxEventIDLen):
		return paymentEvent{}, poisoned(ReasonInvalidEventID, "event_id %q", clip(e.EventID))
	case !ids.IsRef(e.PaymentID, maxIDLen):
		return paymentEvent{}, poisoned(ReasonInvalidPaymentID, "payment_id %q", clip(e.PaymentID))
	case e.AmountCents <= 0 || !ids.IsCurrency(e.Currency):
		return paymentEvent{}, poisoned(ReasonInvalidAmount, "amount_cents %d, currency %q", e.AmountCents, clip(e.Currency))
	}
	id, ok := order.ParseID(e.OrderID)
	if !ok {
		return paymentEvent{}, poisoned(ReasonInvalidOrderID, "order_id %q", clip(e.OrderID))
	}
	return paymentEvent{Event: e, orderID: id, msg: msg}, nil
}

// clip bounds message text echoed into a header or a log line.
func clip(s string) string {
	const n = 64
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
