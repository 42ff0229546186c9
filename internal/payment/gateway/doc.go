// Package gateway holds the payment gateway adapters of the payment service.
// The interface they implement is payment.Gateway (declared by the domain,
// which uses it); the only adapter today is the Simulator
// (PAYMENT_GATEWAY=simulator), which also serves the sandbox routes that let
// a walkthrough or a test play the gateway: record an outcome and deliver
// signed callbacks, as many copies as a retrying gateway would send.
//
// Guarantees of the Simulator:
//   - Its records live in its own table (sim_gateway_records) in the
//     service's database, so Query answers the same after a restart.
//   - One outcome per payment at a time; recording the same status again
//     keeps its gateway_txn_id (identical retries), a different status
//     replaces it (to show a contradicting callback).
//   - Refund is idempotent on its key: UNIQUE(kind, record_key) lets one
//     refund row exist per key, whatever the concurrency; a key already used
//     for another payment is an error.
//
// Failure boundary: the simulator is not a gateway. It refunds whatever it
// is asked to (it does not check that it holds a SUCCEEDED outcome), keeps
// no balances, and its callbacks go only to the service's own URL.
package gateway
