package reconcile

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/onceonly/onceonly/internal/payment"
	"github.com/onceonly/onceonly/internal/platform/apperr"
	"github.com/onceonly/onceonly/internal/platform/db"
)

// The three repairs. Each is idempotent — a second run, or a stale holder
// of the lock repeating one, changes nothing more:
//
//   - redrive: the outbox row goes back to unpublished with its original
//     event_id (re-added from the payment if it was pruned); the order
//     service de-duplicates on event_id, so a late event is absorbed.
//     A row still unpublished is left alone: that repair is under way.
//   - query: the gateway's answer goes through ApplyCallback, a CAS from
//     PENDING: applied once, a duplicate after that.
//   - refund: the gateway refund carries the payment's refund key (the
//     gateway refunds once per key), then SUCCEEDED → REFUNDED is a fenced
//     CAS with its payment.refunded event: once.

// redrive re-sends the lost payment.succeeded event of p.
func (x *run) redrive(ctx context.Context, p payment.Payment) error {
	if p.EventID == "" {
		// A row from before event ids were recorded: which outbox row is
		// its event is unknown, and a new event id would be a second
		// event to the consumer. A human decides.
		x.flag(KindEventLost, p.ID, p.OrderID)
		return nil
	}
	ev := payment.EventOf(p, payment.Succeeded, p.UpdatedAt, p.EventID)
	res, err := x.r.cfg.Store.Redrive(ctx, x.fence, ev, x.reqID)
	if err != nil {
		return fmt.Errorf("payment database: redrive payment %d: %w", p.ID, err)
	}
	switch res {
	case Redriven:
		x.rep.Republished++
		x.r.m.repairs.WithLabelValues(RepairRepublished).Inc()
		x.diff(KindEventLost, p.ID, p.OrderID, ActionRepublished)
		x.r.cfg.Notify()
	case Reinserted:
		x.rep.Republished++
		x.r.m.repairs.WithLabelValues(RepairReinserted).Inc()
		x.diff(KindEventLost, p.ID, p.OrderID, ActionReinserted)
		x.r.cfg.Notify()
	default:
		x.diff(KindEventLost, p.ID, p.OrderID, ActionAlreadyQueued)
	}
	return nil
}

// query asks the gateway about a PENDING payment past the grace period and
// applies a SUCCEEDED or FAILED answer through the callback's path.
func (x *run) query(ctx context.Context, p payment.Payment) error {
	out, err := x.r.cfg.Gateway.Query(ctx, p)
	if err != nil {
		return x.gatewayFailed(ctx, KindStuckPending, p, fmt.Errorf("query: %w", err))
	}
	switch out.Status {
	case payment.Pending:
		x.rep.Queried++
		x.diff(KindStuckPending, p.ID, p.OrderID, ActionNoOutcome)
		return nil
	case payment.Succeeded, payment.Failed:
	default:
		x.r.log.WarnContext(ctx, "reconcile: gateway answered an unknown status", "payment_id", p.ID, "status", out.Status)
		x.flag(KindStuckPending, p.ID, p.OrderID)
		return nil
	}
	res, err := x.r.cfg.Payments.ApplyCallback(ctx, payment.OutcomeCallback(p, out, x.reqID))
	switch {
	case err == nil && res == payment.ResultProcessed:
		x.rep.Queried++
		x.r.m.repairs.WithLabelValues(RepairApplied).Inc()
		x.diff(KindStuckPending, p.ID, p.OrderID, ActionApplied)
	case err == nil && res == payment.ResultDuplicate:
		x.rep.Queried++ // a late callback applied the same outcome first
		x.diff(KindStuckPending, p.ID, p.OrderID, ActionAlreadyDone)
	case err == nil:
		// "conflict": the payment left PENDING meanwhile with the other
		// outcome. The callback path recorded it; a human decides.
		x.flag(KindStuckPending, p.ID, p.OrderID)
	case apperr.CodeOf(err) == apperr.DependencyUnavailable:
		return fmt.Errorf("payment database: apply the gateway's outcome of payment %d: %w", p.ID, err)
	default:
		// not_found, amount_mismatch, invalid: the gateway's answer does not
		// fit the payment (the mismatch is recorded by the callback path).
		x.r.log.WarnContext(ctx, "reconcile: gateway outcome not applicable", "payment_id", p.ID, "err", err)
		x.flag(KindStuckPending, p.ID, p.OrderID)
	}
	return nil
}

// refund refunds a SUCCEEDED payment whose order was CANCELLED: first the
// gateway (idempotent on the refund key), then the fenced CAS. The other
// order would leave a REFUNDED payment whose money was never returned if
// the process died between the two; this one leaves a SUCCEEDED payment
// refunded at the gateway, which the next run refunds again with the same
// key — a no-op there — and then marks.
func (x *run) refund(ctx context.Context, p payment.Payment) error {
	key := payment.RefundKeyOf(p)
	if err := x.r.cfg.Gateway.Refund(ctx, p, key); err != nil {
		return x.gatewayFailed(ctx, KindPaidAfterCancel, p, fmt.Errorf("refund: %w", err))
	}
	at := db.Now()
	ev := payment.EventOf(p, payment.Refunded, at, uuid.NewString())
	err := x.r.cfg.Store.MarkRefunded(ctx, x.fence, p.ID, payment.Change{At: at, RefundKey: key, Event: &ev, RequestID: x.reqID})
	switch {
	case err == nil:
		x.rep.Refunded++
		x.r.m.repairs.WithLabelValues(RepairRefunded).Inc()
		x.diff(KindPaidAfterCancel, p.ID, p.OrderID, ActionRefunded)
		x.r.cfg.Notify()
	case errors.Is(err, payment.ErrConflict):
		// No longer SUCCEEDED: a previous holder marked it after all.
		x.diff(KindPaidAfterCancel, p.ID, p.OrderID, ActionAlreadyDone)
	default:
		return fmt.Errorf("payment database: mark payment %d refunded: %w", p.ID, err)
	}
	return nil
}

// gatewayFailed records a failed gateway call as a diff left for the next
// run and lets the run go on — unless the run itself was cut off (then that
// is the error) or the gateway has failed maxGatewayErrors times.
func (x *run) gatewayFailed(ctx context.Context, kind string, p payment.Payment, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("gateway: payment %d: %w", p.ID, err)
	}
	x.gatewayErrs++
	if x.firstGatewayErr == nil {
		x.firstGatewayErr = fmt.Errorf("payment %d: %w", p.ID, err)
	}
	x.diff(kind, p.ID, p.OrderID, ActionGatewayError)
	x.r.log.WarnContext(ctx, "reconcile: gateway call failed; left for the next run", "payment_id", p.ID, "err", err)
	if x.gatewayErrs >= maxGatewayErrors {
		return fmt.Errorf("gateway: %d calls failed, run stopped; first: %w", x.gatewayErrs, x.firstGatewayErr)
	}
	return nil
}
