package reconcile

import "time"

// MaxDiffs bounds the diffs a report stores and returns. The counts are
// always complete; past the bound only the first MaxDiffs items found are
// listed (Report.DiffsTotal tells how many there were), so a disaster —
// every event of a day lost — costs a bounded report, not one row per
// payment.
const MaxDiffs = 1000

// Status is a run's outcome.
type Status string

const (
	// Succeeded: both sides of the window were compared to the end.
	Succeeded Status = "succeeded"
	// Failed: the run stopped early (order service, database or gateway
	// unavailable, timeout, lost lock); Error says why. What it repaired
	// before stopping is repaired (each repair is idempotent); the rest is
	// the next run's.
	Failed Status = "failed"
)

// Kinds of difference (Diff.Kind): stable snake_case strings, part of the
// report's contract.
const (
	// A SUCCEEDED payment whose order is still PENDING_PAYMENT: its
	// payment.succeeded event was lost (or is late).
	KindEventLost = "event_lost"
	// A PENDING payment past the grace period: its callback was lost, or
	// the gateway has no outcome yet.
	KindStuckPending = "stuck_pending"
	// A SUCCEEDED payment whose order is CANCELLED: paid too late.
	KindPaidAfterCancel = "paid_after_cancel"
	// A payment whose order the order service does not know.
	KindOrderMissing = "order_missing"
	// A SUCCEEDED payment whose amount or currency differ from its order's.
	KindAmountMismatch = "amount_mismatch"
	// A REFUNDED payment whose order is PAID.
	KindRefundedButPaid = "refunded_but_paid"
	// A PAID order that has no SUCCEEDED payment at all (order side).
	KindPaidWithoutPayment = "paid_without_payment"
	// Any other pair of states no transition explains (a REFUNDED payment
	// for an order still PENDING_PAYMENT, an unknown status).
	KindStateConflict = "state_conflict"
)

// Actions taken on a difference (Diff.Action).
const (
	ActionRepublished   = "republished"    // the outbox row was made unpublished again
	ActionReinserted    = "reinserted"     // the pruned event was rebuilt with its original id
	ActionAlreadyQueued = "already_queued" // the event still waits in the outbox: nothing to do
	ActionApplied       = "applied"        // the gateway's outcome was applied (callback path)
	ActionNoOutcome     = "no_outcome"     // the gateway has no outcome yet: nothing changed
	ActionAlreadyDone   = "already_done"   // a callback or another run got there first
	ActionRefunded      = "refunded"       // refunded at the gateway and marked REFUNDED
	ActionGatewayError  = "gateway_error"  // the gateway call failed: left for the next run
	ActionFlagged       = "flagged"        // left to a human: never auto-fixed
)

// Diff is one difference found.
type Diff struct {
	Kind string
	// PaymentID is 0 when no payment is involved (a PAID order without any).
	PaymentID int64
	OrderID   string
	Action    string
}

// Report is one run's result (DESIGN.md, "GET /v1/reconciliations/latest").
//
// Counting: Checked counts payments of the window plus PAID orders of the
// window whose payment the payment side did not cover. Every checked item is
// counted in exactly one of Matched, Republished, Queried, Refunded and
// Flagged, except an item whose repair is already under way (its event still
// waits in the outbox, a callback beat the run to it) or whose gateway call
// failed: those appear only as diffs. Queried counts stuck PENDING payments
// the gateway answered for, whether its answer changed anything or not.
type Report struct {
	ID          int64
	Status      Status
	Error       string
	WindowStart time.Time
	WindowEnd   time.Time
	StartedAt   time.Time
	FinishedAt  time.Time
	Checked     int64
	Matched     int64
	Republished int64
	Queried     int64
	Refunded    int64
	Flagged     int64
	// Diffs are the first MaxDiffs differences found.
	Diffs []Diff
	// DiffsTotal counts every difference found, listed or not.
	DiffsTotal int64
	// FenceToken is the run's fencing token (for operators).
	FenceToken int64
}
