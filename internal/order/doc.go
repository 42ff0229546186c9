// Package order is the order service's business: an order, its state machine,
// the submit that creates it exactly once per submit token (DESIGN.md,
// techniques 1 and 2), and /pay, which asks the payment service for the
// order's one live payment. It declares what it needs — a Store (adapter:
// internal/order/store), the submit Tokens (internal/platform/idempotency)
// and Payments (adapter: internal/order/paymentclient) — and the HTTP
// adapter (internal/order/httpapi) maps its *apperr.Error values to
// statuses. The background work lives next to it: the payment-event consumer
// (internal/order/consumer, technique 5) and the timeout closer
// (internal/order/closer, technique 3).
//
// # Guarantees
//
//   - One token, one order. However often a submit is retried, duplicated or
//     raced, at most one order row carries its token: Redis lets one attempt
//     at a time in (Claim), and the UNIQUE index on orders.submit_token
//     refuses a second insert whatever Redis says. Every other answer is the
//     same order again (200, Idempotent-Replayed), 409 while an attempt is in
//     flight, or 422 for a different body.
//   - A key that created an order replays it for ever: the body hash is
//     stored on the row, so when Redis has forgotten the token the database
//     answers the replay (or the 422).
//   - A refused body (400) never uses up its key; a failed insert releases it.
//   - Every state change is one conditional UPDATE (WHERE id AND status,
//     version+1) whose rows-affected count decides; the transitions allowed
//     are the table in order.go. Of any number of concurrent cancels exactly
//     one succeeds, and version grows by exactly one per transition.
//   - A user only ever sees their own orders; another user's is not found.
//   - Pay never makes a second live payment: the payment service is
//     idempotent on the order id (so the client retries network errors and
//     5xx safely), and the payment id is attached with a conditional UPDATE
//     that requires PENDING_PAYMENT, so it never lands on an order the
//     consumer paid or a cancel closed meanwhile.
//
// # Failure boundary
//
//	fault                                   | answer                                  | decided by
//	----------------------------------------+-----------------------------------------+--------------
//	the same submit N times at once         | one 201, others 200 replay or 409       | Redis claim
//	Redis loses the token after success     | replay 200 / 422 / no second row        | UNIQUE index,
//	(restart, failover, TTL ended)          |                                         | body_hash
//	Redis unreachable or too slow           | 503 for every submit, even a replay;    | fail closed
//	                                        | nothing inserted                        |
//	process dies after the claim            | 409 until the lease ends, then the      | lease, then
//	                                        | retry claims and the database decides   | UNIQUE index
//	attempt slower than the lease           | a retry gets in; one insert wins, the   | UNIQUE index
//	                                        | other answers the winner's order        |
//	insert fails (database down)            | 503; the key is released for a retry    | Release
//	client hangs up mid-insert              | the attempt completes and records its   | detached ctx
//	                                        | order; the retry replays it             |
//	cancel races cancel (or payment)        | exactly one wins; the rest 409          | CAS UPDATE
//	payment service down or 5xx on /pay     | 3 attempts (2 s each), then 503; the    | client retry,
//	                                        | order is unchanged                      | idempotency
//	order paid or cancelled during /pay     | answered for its new state (200 / 409)  | attach CAS
//
// Not guaranteed: availability of submits without Redis (fail closed by
// design), nor an answer stable across the token's life when the order
// changes meanwhile (a replay shows the order as it is now).
package order
