// Package reconcile is the payment service's last line of defence
// (DESIGN.md, technique 6): Kafka does not know that a business message went
// missing, a job comparing both sides does. Every RECONCILE_INTERVAL — and on
// POST /v1/reconciliations, under the same lock — one instance compares the
// payments changed in [now − RECONCILE_WINDOW, now − RECONCILE_GRACE] with
// their orders, and the PAID orders changed in that window with their
// payments; it repairs what a repair can settle, flags the rest, and writes
// a report (reconciliation_runs, reconciliation_diffs).
//
// # How
//
// Payment side: pages of at most 500 payments by keyset on (updated_at, id)
// — never OFFSET — and one POST /internal/v1/orders/batch-get per page. Each
// pair is classified by one table (classify):
//
//	SUCCEEDED + PENDING_PAYMENT  event lost → re-drive the outbox row (published_at = NULL,
//	                             original event_id; rebuilt from the payment with that id if
//	                             the row was pruned; left alone while still unpublished)
//	PENDING, past the grace      callback lost → Gateway.Query; SUCCEEDED/FAILED applied by
//	                             payment.Service.ApplyCallback (the callback's own CAS and
//	                             outbox event); a PENDING answer changes nothing
//	SUCCEEDED + CANCELLED        paid too late → Gateway.Refund with payment.RefundKeyOf,
//	                             then SUCCEEDED → REFUNDED by CAS with a payment.refunded
//	                             event, in one fenced transaction
//	order missing, amounts that  flagged, never repaired
//	differ, REFUNDED + PAID,
//	anything else unexplained
//	SUCCEEDED + PAID, FAILED + any order, REFUNDED + CANCELLED: matched
//
// Order side: pages of the PAID orders changed in the window (GET
// /internal/v1/orders?status=PAID) and the payments of each page. A PAID
// order with no SUCCEEDED payment is flagged (paid_without_payment), and one
// whose payment was REFUNDED too (refunded_but_paid): a PAID order is never
// changed from here — the money trail that would justify a change is what
// is missing. An order whose SUCCEEDED or REFUNDED payment changed since the
// window's start is the payment side's (this run's, or the next's if it
// changed during the run), so no pair is counted twice.
//
// # Guarantees
//
//   - One run at a time across instances: the lock (lock.Runner) for the
//     schedule and for POST alike; a POST while a run holds it is 409
//     reconciliation_in_progress and runs nothing.
//   - Every database write of a run — re-drive, REFUNDED, the report — is a
//     fenced transaction (lock.Fence.Tx): a holder that lost its lock
//     without noticing writes nothing once a newer holder has a token.
//   - Repairs are idempotent; running twice repairs nothing twice. A
//     re-drive happens only for a published row (an unpublished one is
//     already on its way: "already_queued"); a queried outcome is a CAS from
//     PENDING; a refund is keyed at the gateway and a CAS from SUCCEEDED. The
//     event a re-drive sends carries its original event_id, which the order
//     service's consumer de-duplicates, so a merely late event is absorbed.
//   - Nothing is decided on a guess: a page whose orders the order service
//     did not give (error, timeout, undecodable answer) is not classified;
//     the run ends "failed" with the reason and the next run starts over. An
//     order absent from a successful batch-get is missing (flagged).
//   - Memory is flat in the window's size: one page of payments and one of
//     orders at a time, at most MaxDiffs diffs kept (the counts are always
//     complete). Measured (BenchmarkReconcile): 1,000,000 payments in about
//     30 s at under 40 MB peak RSS, 9× the time of 100,000.
//   - Every run writes a report, also a failed one (its write has a bound of
//     its own, so a run cut off by RECONCILE_TIMEOUT says so).
//
// # Failure boundary
//
//	fault                                  what happens
//	order service down, slow, 5xx, 429     each call retried 3 times (100 ms, 300 ms); then the run
//	                                       ends failed, naming the route and the answer; pages already
//	                                       compared keep their (idempotent) repairs; nothing else is
//	                                       touched
//	gateway call fails                     that payment is listed (gateway_error) and left for the next
//	                                       run; the run goes on and ends failed; 10 failures stop it
//	crash between the gateway refund and   the payment stays SUCCEEDED; the next run refunds again with
//	REFUNDED                               the same key (a no-op at the gateway) and marks it
//	lock lost during a run (pause,         the watchdog cancels the run; its writes are refused by the
//	failover)                              fence once a newer holder has a token. Its gateway calls are
//	                                       not — a Query only reads, a Refund is keyed
//	database down                          the run ends failed (if its report can be written) or its
//	                                       report is lost (POST answers 503); nothing half-written
//	RECONCILE_TIMEOUT reached              the run stops, its report says "timed out"; the rest is the
//	                                       next run's
//	event lost and its row pruned          rebuilt from the payment with the original event_id
//	                                       (payments.event_id); rows from before that column cannot
//	                                       be re-driven and are flagged
//
// Not guaranteed: that a repair's effect is visible by the end of the run
// (the relay and the consumer are asynchronous: the next run sees the
// order PAID), nor that what one repair leaves inconsistent (a queried
// SUCCEEDED whose order was cancelled) is settled before the next run.
//
// # Report
//
// Counts: checked (payments, plus PAID orders the payment side did not
// cover), matched, republished, queried (gateway answers for stuck PENDING
// payments), refunded, flagged. Each checked item is in exactly one of the
// five, except one whose repair was already under way or whose gateway call
// failed: those appear only among the diffs. Diffs (kind, payment_id,
// order_id, action): the kinds and actions are the Kind* and Action*
// constants; the first MaxDiffs per run are kept.
//
// Metrics (onceonly_reconcile_*): runs_total{status}, items_checked_total,
// diffs_total{kind}, repairs_total{kind}, duration_seconds,
// last_success_timestamp_seconds; the lock's onceonly_lock_* with
// job="payment-reconciliation" (contended_total counts the ticks and POSTs
// refused because another run held it).
package reconcile
