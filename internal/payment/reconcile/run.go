package reconcile

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/onceonly/onceonly/internal/payment"
	"github.com/onceonly/onceonly/internal/platform/db"
	"github.com/onceonly/onceonly/internal/platform/lock"
)

// maxGatewayErrors ends a run whose gateway keeps failing: each failed call
// is left for the next run, but a dead gateway is not asked once per
// payment of the window.
const maxGatewayErrors = 10

// maxErrorLen is the width of reconciliation_runs.error.
const maxErrorLen = 1000

// run is one reconciliation in progress: its fence, its report so far.
type run struct {
	r     *Reconciler
	fence lock.Fence
	reqID string
	rep   Report

	gatewayErrs     int
	firstGatewayErr error
}

// reconcile compares both sides of the window and repairs what it may. It
// never returns an error: a run that stops early is a Failed report that
// says why.
func (r *Reconciler) reconcile(ctx context.Context, f lock.Fence, requestID string) Report {
	now := r.cfg.Now().UTC()
	x := &run{r: r, fence: f, reqID: requestID, rep: Report{
		Status:      Succeeded,
		WindowStart: now.Add(-r.cfg.Window).Truncate(time.Microsecond),
		WindowEnd:   now.Add(-r.cfg.Grace).Truncate(time.Microsecond),
		StartedAt:   db.Now(),
		FenceToken:  f.Token(),
	}}
	err := x.paymentSide(ctx)
	if err == nil {
		err = x.orderSide(ctx)
	}
	if err == nil && x.gatewayErrs > 0 {
		err = fmt.Errorf("gateway: %d call(s) failed, left for the next run; first: %w", x.gatewayErrs, x.firstGatewayErr)
	}
	if err != nil {
		x.rep.Status = Failed
		x.rep.Error = clip(r.describe(ctx, err), maxErrorLen)
	}
	return x.rep
}

// describe names why a run stopped: its own deadline or a lost lock say so
// first, since the error they caused is only a symptom.
func (r *Reconciler) describe(ctx context.Context, err error) string {
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, lock.ErrLockLost):
		return fmt.Sprintf("lock lost, run stopped: %v", err)
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fmt.Sprintf("timed out after %s (RECONCILE_TIMEOUT): %v", r.cfg.Timeout, err)
	case ctx.Err() != nil:
		return fmt.Sprintf("stopped (shutdown): %v", err)
	}
	return err.Error()
}

// paymentSide pages through the window's payments by keyset, one batch-get
// per page, and decides each pair. A page whose orders the order service
// could not give is not classified at all: nothing is repaired on a guess.
func (x *run) paymentSide(ctx context.Context) error {
	cfg := x.r.cfg
	var after *Key
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		page, err := cfg.Store.PaymentsUpdated(ctx, x.rep.WindowStart, x.rep.WindowEnd, after, cfg.PageSize)
		if err != nil {
			return fmt.Errorf("payment database: %w", err)
		}
		if len(page) == 0 {
			return nil
		}
		orders, err := x.ordersOf(ctx, page)
		if err != nil {
			return err
		}
		for _, p := range page {
			o, found := orders[p.OrderID]
			if err := x.checkPayment(ctx, p, o, found); err != nil {
				return err
			}
		}
		if len(page) < cfg.PageSize {
			return nil
		}
		last := page[len(page)-1]
		after = &Key{UpdatedAt: last.UpdatedAt, ID: last.ID}
	}
}

// ordersOf asks the order service for the orders of a page (one call: a
// page holds at most MaxBatch payments, so at most MaxBatch order ids).
func (x *run) ordersOf(ctx context.Context, page []payment.Payment) (map[string]Order, error) {
	ids := make([]string, 0, len(page))
	seen := make(map[string]struct{}, len(page))
	for _, p := range page {
		if _, ok := seen[p.OrderID]; !ok {
			seen[p.OrderID] = struct{}{}
			ids = append(ids, p.OrderID)
		}
	}
	found, err := x.r.cfg.Orders.BatchGet(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("order service: %w", err)
	}
	orders := make(map[string]Order, len(found))
	for _, o := range found {
		if _, asked := seen[o.ID]; asked {
			orders[o.ID] = o
		}
	}
	return orders, nil
}

// checkPayment decides one payment against its order and carries out the
// verdict. Its error stops the run (database, fence, deadline); a failed
// gateway call does not (see gatewayFailed).
func (x *run) checkPayment(ctx context.Context, p payment.Payment, o Order, found bool) error {
	x.rep.Checked++
	x.r.m.checked.Inc()
	v := classify(p, o, found)
	switch v.plan {
	case planMatch:
		x.rep.Matched++
	case planFlag:
		x.flag(v.kind, p.ID, p.OrderID)
	case planRedrive:
		return x.redrive(ctx, p)
	case planQuery:
		return x.query(ctx, p)
	case planRefund:
		return x.refund(ctx, p)
	}
	return nil
}

// orderSide pages through the window's PAID orders and checks that each has
// a SUCCEEDED payment; a PAID order without one is flagged, never fixed
// (there is nothing true to fix it with: the money trail is missing).
func (x *run) orderSide(ctx context.Context) error {
	cfg := x.r.cfg
	cursor := ""
	start := x.rep.WindowStart.UnixMicro()
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		page, err := cfg.Orders.ListPaid(ctx, x.rep.WindowStart, x.rep.WindowEnd, cursor, cfg.PageSize)
		if err != nil {
			return fmt.Errorf("order service: %w", err)
		}
		if len(page.Orders) > 0 {
			ids := make([]string, len(page.Orders))
			for i, o := range page.Orders {
				ids[i] = o.ID
			}
			pays, err := cfg.Store.PaymentsOfOrders(ctx, ids)
			if err != nil {
				return fmt.Errorf("payment database: %w", err)
			}
			byOrder := make(map[string][]payment.Payment, len(page.Orders))
			for _, p := range pays {
				byOrder[p.OrderID] = append(byOrder[p.OrderID], p)
			}
			for _, o := range page.Orders {
				if o.Status != OrderPaid {
					continue // the listing was asked for PAID only
				}
				v, about, covered := paidOrderVerdict(o, byOrder[o.ID], start)
				if covered {
					continue
				}
				x.rep.Checked++
				x.r.m.checked.Inc()
				var id int64
				if about != nil {
					id = about.ID
				}
				if v.plan == planMatch {
					x.rep.Matched++
				} else {
					x.flag(v.kind, id, o.ID)
				}
			}
		}
		switch {
		case page.NextCursor == "":
			return nil
		case page.NextCursor == cursor:
			return errors.New("order service: the listing returned the cursor it was given")
		}
		cursor = page.NextCursor
	}
}

// diff records a difference: always counted, listed up to MaxDiffs.
func (x *run) diff(kind string, paymentID int64, orderID, action string) {
	x.rep.DiffsTotal++
	x.r.m.diffs.WithLabelValues(kind).Inc()
	if len(x.rep.Diffs) < MaxDiffs {
		x.rep.Diffs = append(x.rep.Diffs, Diff{Kind: kind, PaymentID: paymentID, OrderID: orderID, Action: action})
	}
}

// flag records a difference left to a human.
func (x *run) flag(kind string, paymentID int64, orderID string) {
	x.rep.Flagged++
	x.diff(kind, paymentID, orderID, ActionFlagged)
	x.r.log.Debug("reconcile: flagged", "kind", kind, "payment_id", paymentID, "order_id", orderID)
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}
