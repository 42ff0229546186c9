// Package consumer is the order service's idempotent consumer of payment
// events (DESIGN.md, technique 5): group order-service on payment.events,
// run by the platform's kafka.Runner, applying each event to its order
// exactly once and dead-lettering what can never be applied.
//
// Read consumer.go top to bottom: Handle is the whole technique.
//
//	batch (messages of one partition, in offset order; key = order_id, so one
//	order's events are in one partition, in order)
//	  → decode + validate; look up the orders named      poison → DLQ first
//	  → BEGIN
//	      skip event_ids already in consumed_events (one read per batch)
//	      per event: CAS the order (succeeded: PENDING_PAYMENT → PAID)
//	                 INSERT consumed_events (UNIQUE event_id) with the outcome
//	    COMMIT
//	  → return nil: the Runner marks and commits the batch's last offset
//
// # Guarantees
//
//   - Exactly-once effect per event_id: an event moves its order at most
//     once, however often it is delivered (crash and restart, rebalance,
//     duplicates on the topic, a re-driven outbox row). The order's UPDATE and
//     the event's consumed_events row commit in one transaction; a second
//     delivery finds the row and is skipped (counted as duplicate, and in
//     consumed_events.deliveries).
//   - No loss: offsets are committed only after the transaction committed
//     (or the message was dead-lettered); any failure returns an error and
//     the Runner retries the same batch in place with capped backoff, never
//     marking past it.
//   - payment.succeeded → PAID (and payment_id set); for an order already
//     CANCELLED (the closer or the user won the CAS) it is recorded with
//     outcome late, for reconciliation to refund; for an order already PAID
//     by this payment (a re-drive under a new event_id) it is recorded as
//     duplicate, without a second transition. payment.failed and
//     payment.refunded are recorded; the order is left as it is.
//   - Poison (undecodable, schema_version ≠ 1, unknown type, missing or
//     malformed ids, non-positive amount, unknown order, amount or currency
//     differing from the order's) goes to payment.events.dlq with reason,
//     source_topic, source_partition and source_offset headers, and the
//     partition keeps flowing.
//
// # Failure boundary
//
//	fault                                 | what happens
//	--------------------------------------+------------------------------------------------
//	crash between UPDATE and COMMIT       | the database rolls the transaction back; the
//	                                      | offset was not committed; the batch comes again
//	                                      | and is applied then
//	crash after COMMIT, before the offset | the batch comes again; every event is found in
//	commit                                | consumed_events and skipped
//	rebalance mid-batch                   | the session's context ends: the transaction is
//	                                      | rolled back and the batch goes to the next owner;
//	                                      | if the old owner's COMMIT won the race, the new
//	                                      | owner's INSERT waits on its row and skips
//	poison message                        | dead-lettered before the batch commits; a crash
//	                                      | in between writes a second DLQ copy (at-least-
//	                                      | once; a retry in place does not: remembered)
//	database down, deadlock, lock wait    | error → retried in place with backoff (100 ms to
//	timeout, batch deadline (15 s)        | 2 s); the offset stays put; nothing is skipped
//	Kafka down for the DLQ producer       | the batch with the poison message waits and
//	                                      | retries; nothing is skipped
//	closer cancels while the payment      | one CAS wins; the loser is "late" (refund) or
//	lands                                 | not cancelled
//
// Not guaranteed: order across partitions (only per order), a single DLQ
// copy, and the absence of "late" payments — a cancelled order's payment can
// still succeed at the gateway; this consumer only makes sure it is recorded.
//
// A killed member's partitions move after the session timeout (6 s, kfake's
// minimum); a member restarted with static membership
// (Consumer.Group.InstanceId) takes them over at once.
//
// On SQLite the same code runs (one writer at a time, so there are no
// deadlocks and no duplicate pre-read); concurrency is proven on MariaDB.
package consumer
