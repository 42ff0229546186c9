package reconcile

import "github.com/onceonly/onceonly/internal/payment"

// plan is what the payment side does with a pair.
type plan int

const (
	planMatch   plan = iota // consistent: count it
	planFlag                // inconsistent and not safely repairable: report it
	planRedrive             // re-drive the payment's event
	planQuery               // ask the gateway, apply its answer
	planRefund              // refund, then SUCCEEDED → REFUNDED
)

type verdict struct {
	kind string // "" when matched
	plan plan
}

// classify decides a payment of the window against its order (found =
// false: the order service does not know it). It is the whole policy of
// the payment side, as one table:
//
//	payment     order             verdict
//	any         missing           order_missing       flag
//	PENDING     any               stuck_pending       query the gateway, apply its answer
//	SUCCEEDED   amount/currency ≠ amount_mismatch     flag (no repair on a pair that disagrees)
//	SUCCEEDED   PAID              matched
//	SUCCEEDED   PENDING_PAYMENT   event_lost          re-drive the event
//	SUCCEEDED   CANCELLED         paid_after_cancel   refund
//	FAILED      PENDING_PAYMENT,  matched             (the order stays payable; PAID by
//	            PAID, CANCELLED                        another attempt is the order side's check)
//	REFUNDED    CANCELLED         matched             (a late payment, refunded)
//	REFUNDED    PAID              refunded_but_paid   flag
//	otherwise                     state_conflict      flag
//
// A PENDING payment is queried whatever its order says: the gateway's
// answer is the truth about the payment, and applying it is the callback
// the gateway failed to deliver. Whatever that leaves inconsistent (paid,
// but the order was cancelled meanwhile) is the next run's to find.
func classify(p payment.Payment, o Order, found bool) verdict {
	if !found {
		return verdict{KindOrderMissing, planFlag}
	}
	switch p.Status {
	case payment.Pending:
		return verdict{KindStuckPending, planQuery}
	case payment.Succeeded:
		if p.AmountCents != o.AmountCents || p.Currency != o.Currency {
			return verdict{KindAmountMismatch, planFlag}
		}
		switch o.Status {
		case OrderPaid:
			return verdict{"", planMatch}
		case OrderPendingPayment:
			return verdict{KindEventLost, planRedrive}
		case OrderCancelled:
			return verdict{KindPaidAfterCancel, planRefund}
		}
	case payment.Failed:
		switch o.Status {
		case OrderPendingPayment, OrderPaid, OrderCancelled:
			return verdict{"", planMatch}
		}
	case payment.Refunded:
		switch o.Status {
		case OrderCancelled:
			return verdict{"", planMatch}
		case OrderPaid:
			return verdict{KindRefundedButPaid, planFlag}
		}
	}
	return verdict{KindStateConflict, planFlag}
}

// paidOrderVerdict decides a PAID order of the window (order side) from
// its payments. covered reports that the payment side judges the pair
// instead: the order's SUCCEEDED (or REFUNDED) payment changed at or after
// windowStart, so it is in this run's payment window or — changed during
// the run — in the next one's; judging it here too would count it twice.
//
//	payments of the order          verdict
//	a SUCCEEDED one                matched (amount_mismatch if they disagree)
//	a REFUNDED one, none SUCCEEDED refunded_but_paid     flag
//	neither                        paid_without_payment  flag (never auto-fixed)
func paidOrderVerdict(o Order, ps []payment.Payment, windowStart int64) (v verdict, about *payment.Payment, covered bool) {
	var succeeded, refunded, latest *payment.Payment
	for i := range ps {
		p := &ps[i]
		switch p.Status {
		case payment.Succeeded:
			succeeded = p
		case payment.Refunded:
			refunded = p
		}
		if latest == nil || p.Attempt > latest.Attempt {
			latest = p
		}
	}
	switch {
	case succeeded != nil:
		if succeeded.UpdatedAt.UnixMicro() >= windowStart {
			return verdict{}, succeeded, true
		}
		if succeeded.AmountCents != o.AmountCents || succeeded.Currency != o.Currency {
			return verdict{KindAmountMismatch, planFlag}, succeeded, false
		}
		return verdict{"", planMatch}, succeeded, false
	case refunded != nil:
		if refunded.UpdatedAt.UnixMicro() >= windowStart {
			return verdict{}, refunded, true
		}
		return verdict{KindRefundedButPaid, planFlag}, refunded, false
	default:
		return verdict{KindPaidWithoutPayment, planFlag}, latest, false
	}
}
