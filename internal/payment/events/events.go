// Package events is the published contract of the payment service on Kafka
// (DESIGN.md, "Kafka"): the topics and the event value. The order service
// imports it to consume; nothing else of the payment service leaks out.
package events

import (
	"time"

	"github.com/onceonly/onceonly/internal/platform/kafka"
)

// Topic names.
const (
	Topic    = "payment.events"
	DLQTopic = "payment.events.dlq"
)

// Event types.
const (
	TypeSucceeded = "payment.succeeded"
	TypeFailed    = "payment.failed"
	TypeRefunded  = "payment.refunded"
)

// SchemaVersion of Event; a consumer dead-letters versions it does not know.
const SchemaVersion = 1

// Event is the JSON value of a message on Topic; its key is OrderID, so one
// order's events stay in one partition, in order.
type Event struct {
	SchemaVersion int       `json:"schema_version"`
	EventID       string    `json:"event_id"`
	Type          string    `json:"type"`
	PaymentID     string    `json:"payment_id"`
	OrderID       string    `json:"order_id"`
	AmountCents   int64     `json:"amount_cents"`
	Currency      string    `json:"currency"`
	OccurredAt    time.Time `json:"occurred_at"`
}

// Topics are created explicitly by both services at start (idempotent).
// Partitions bound the consumer group's parallelism.
var Topics = []kafka.TopicSpec{
	{Name: Topic, Partitions: 6},
	{Name: DLQTopic, Partitions: 1},
}
