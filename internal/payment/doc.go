// Package payment is the payment service's business: a payment per attempt
// of an order, its state machine, idempotent creation, and the gateway's
// signed callback applied exactly once (DESIGN.md, techniques 2–4). It
// declares what it needs — a Store (adapter: internal/payment/store, which
// also writes the outbox) and a Gateway (adapter: internal/payment/gateway)
// — and the HTTP adapter (internal/payment/httpapi) maps its *apperr.Error
// values to statuses.
//
// # Guarantees
//
//   - At most one live payment per order. Attempts are rows with
//     UNIQUE(order_id, attempt); creation reads the latest attempt and
//     inserts the next, and the index — not the read — decides between
//     concurrent callers: the losers read again and return the winner's
//     payment (200). A new attempt follows only a FAILED one; none follows a
//     REFUNDED one (409 invalid_transition).
//   - Every state change is one conditional UPDATE (WHERE id AND status,
//     version+1) whose rows-affected count decides; the transitions allowed
//     are the table in payment.go.
//   - A callback is authenticated before a byte of it is parsed: HMAC-SHA256
//     over timestamp + "." + raw body, compared in constant time against every
//     configured key (rotation), and a ±300 s timestamp window.
//   - A payment moves out of PENDING once, and its event is in the outbox if
//     and only if it did: the UPDATE and the outbox INSERT share one
//     transaction. Of N identical callbacks at once exactly one matches the
//     PENDING row; the others answer "duplicate". The relay is woken after the
//     commit (Config.Notify) and also polls, so a lost wake-up only delays.
//   - A callback that cannot be applied changes nothing and is kept: an amount
//     or currency mismatch (422) and a contradicting status (200 "conflict")
//     are recorded with their raw body and counted.
//
// # Failure boundary
//
//	fault                                     | answer                                 | decided by
//	------------------------------------------+----------------------------------------+---------------------
//	the same create N times at once           | one 201, the rest 200 with that row    | UNIQUE(order_id, attempt)
//	the same callback N times at once         | one "processed", N-1 "duplicate";      | CAS UPDATE
//	                                          | one transition, one outbox row         |
//	forged, altered, unsigned, retired key    | 401, nothing read beyond the headers   | HMAC
//	genuine callback replayed after > 300 s   | 401 (stale)                            | timestamp window
//	genuine callback replayed within 300 s    | 200 "duplicate", nothing changes       | CAS UPDATE
//	amount or currency differ                 | 422, recorded, nothing changes         | comparison
//	contradicting status after the outcome    | 200 "conflict", recorded, counted      | state machine
//	database down during a callback           | 503, neither the transition nor the    | one transaction
//	                                          | event written; the gateway retries     |
//	process dies after the commit, before the | the event waits in the outbox; the     | relay's poll
//	relay's wake-up                           | relay's next poll publishes it         |
//
// Not guaranteed: that the gateway's own view agrees with ours — a callback
// lost for good leaves the payment PENDING until reconciliation
// (internal/payment/reconcile) asks the gateway (Gateway.Query) and applies
// its answer through ApplyCallback. Gateway calls are outside the database
// and cannot be fenced: Query only reads and Refund is idempotent on its key
// (RefundKeyOf derives it from the payment, so a retry sends the same).
package payment
