package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/onceonly/onceonly/internal/payment"
	"github.com/onceonly/onceonly/internal/payment/reconcile"
	"github.com/onceonly/onceonly/internal/platform/apperr"
	"github.com/onceonly/onceonly/internal/platform/lock"
	"github.com/onceonly/onceonly/internal/platform/testkit"
)

// staleLocker hands a run a fence that a newer holder has already
// superseded: an instance that lost its lock without noticing (a pause past
// its lease, a Redis failover).
type staleLocker struct {
	reconcile.Locker
	fence lock.Fence
}

func (s staleLocker) RunOnce(ctx context.Context, _ string, fn lock.Func) error {
	return fn(ctx, s.fence)
}

// A stale holder can still call the gateway — no fence reaches outside the
// database — but none of its writes commit: no re-drive, no REFUNDED, no
// report. The refund it made is harmless because the real run refunds with
// the same key, and the gateway refunds once.
func TestReconcile_StaleHolderWritesNothingAndItsRefundIsNotRepeated(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 10)
	late := f.paid("o-late", 200, 2*time.Minute) // first in the window: its refund is tried first
	lost := f.paid("o-lost", 100, time.Minute)
	f.order(lost, reconcile.OrderPendingPayment)
	f.order(late, reconcile.OrderCancelled)

	ctx := context.Background()
	var stale lock.Fence
	if err := f.locker.RunOnce(ctx, reconcile.DefaultJob, func(_ context.Context, fc lock.Fence) error { stale = fc; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := f.locker.RunOnce(ctx, reconcile.DefaultJob, func(context.Context, lock.Fence) error { return nil }); err != nil {
		t.Fatal(err) // a newer holder took a token
	}
	old := f.reconciler(func(c *reconcile.Config) { c.Locker = staleLocker{f.locker, stale} })
	_, err := old.RunNow(ctx, "stale")
	if apperr.CodeOf(err) != apperr.ReconciliationInProgress || !errors.Is(err, lock.ErrFenced) {
		t.Fatalf("stale run: %v, want 409 reconciliation_in_progress wrapping ErrFenced", err)
	}
	if f.count("outbox_events", "published_at IS NULL") != 0 || f.status(late.ID) != payment.Succeeded ||
		f.count("reconciliation_runs", "") != 0 {
		t.Fatal("a stale holder's write committed")
	}
	if n, _ := f.sim.Refunds(ctx, late.ID); n != 1 {
		t.Fatalf("%d gateway refunds after the stale run, want 1 (it cannot be fenced)", n)
	}

	rep, err := f.reconciler(nil).RunNow(ctx, "current")
	if err != nil || rep.Status != reconcile.Succeeded || rep.Republished != 1 || rep.Refunded != 1 {
		t.Fatalf("current holder's run: %+v, %v", rep, err)
	}
	if n, _ := f.sim.Refunds(ctx, late.ID); n != 1 || f.status(late.ID) != payment.Refunded {
		t.Fatalf("%d gateway refunds, status %s; want 1 and REFUNDED", n, f.status(late.ID))
	}
}

// The order service fails in the middle of a run: the pages it answered are
// repaired, the page it did not answer is not touched, and the run says why.
func TestReconcile_OrderServiceFailingMidRunRepairsOnlyAnsweredPages(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 10)
	var pays []payment.Payment
	for i := range 4 {
		p := f.paid(fmt.Sprintf("o-%d", i), 100, time.Duration(10-i)*time.Minute) // oldest first
		f.order(p, reconcile.OrderPendingPayment)
		pays = append(pays, p)
	}
	f.fake.FailAfter(1, http.StatusBadGateway)
	rep, err := f.reconciler(func(c *reconcile.Config) { c.PageSize = 2 }).RunNow(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Status != reconcile.Failed || !strings.Contains(rep.Error, "502") || rep.Checked != 2 || rep.Republished != 2 {
		t.Fatalf("report %+v", rep)
	}
	for i, p := range pays {
		unpublished := f.count("outbox_events", "msg_key = ? AND published_at IS NULL", p.OrderID)
		if want := int64(map[bool]int{true: 1}[i < 2]); unpublished != want {
			t.Fatalf("payment %d (page %d): %d unpublished rows, want %d", i, i/2+1, unpublished, want)
		}
	}
}

// failingGateway answers Query with an error for the payments in fail.
type failingGateway struct {
	payment.Gateway
	fail map[int64]bool
}

func (g failingGateway) Query(ctx context.Context, p payment.Payment) (payment.Outcome, error) {
	if g.fail[p.ID] {
		return payment.Outcome{}, errors.New("gateway timeout")
	}
	return g.Gateway.Query(ctx, p)
}

// A gateway call that fails is left for the next run; the rest of the window
// is still reconciled, and the run reports the failure.
func TestReconcile_GatewayErrorIsLeftForTheNextRunAndTheRestGoesOn(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 10)
	ctx := context.Background()
	stuck, _, err := f.svc.Create(ctx, payment.NewPayment{OrderID: "o-stuck", UserID: "u", AmountCents: 5, Currency: "CNY"})
	if err != nil {
		t.Fatal(err)
	}
	old := time.Now().UTC().Add(-10 * time.Minute)
	f.db.Exec("UPDATE payments SET created_at = ?, updated_at = ? WHERE id = ?", old, old, stuck.ID)
	stuck, _ = f.store.Get(ctx, stuck.ID)
	f.order(stuck, reconcile.OrderPendingPayment)
	lost := f.paid("o-lost", 100, time.Minute)
	f.order(lost, reconcile.OrderPendingPayment)

	r := f.reconciler(func(c *reconcile.Config) { c.Gateway = failingGateway{f.sim, map[int64]bool{stuck.ID: true}} })
	rep, err := r.RunNow(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Status != reconcile.Failed || !strings.Contains(rep.Error, "gateway timeout") || rep.Republished != 1 || rep.Queried != 0 {
		t.Fatalf("report %+v", rep)
	}
	if d := rep.Diffs[0]; d.Kind != reconcile.KindStuckPending || d.Action != reconcile.ActionGatewayError || d.PaymentID != stuck.ID {
		t.Fatalf("diffs %+v", rep.Diffs)
	}
	if f.status(stuck.ID) != payment.Pending {
		t.Fatal("the stuck payment changed without an answer")
	}
}

// More differences than MaxDiffs: the report lists MaxDiffs of them, and
// its counts are complete.
func TestReconcile_DiffsAreCappedAndCountsStayComplete(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 10)
	const n = reconcile.MaxDiffs + 100
	at := time.Now().UTC().Add(-10 * time.Minute).Truncate(time.Microsecond)
	testkit.BulkInsert(t, f.db, "payments", []string{"order_id", "user_id", "attempt", "status", "amount_cents", "currency",
		"version", "created_at", "updated_at"}, n, func(i int, row []any) {
		row[0], row[1], row[2], row[3], row[4], row[5] = fmt.Sprintf("gone-%d", i), "u", 1, "FAILED", 1, "CNY"
		row[6], row[7], row[8] = 2, at, at.Add(time.Duration(i)*time.Microsecond)
	})
	r := f.reconciler(nil)
	rep, err := r.RunNow(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Checked != n || rep.Flagged != n || rep.DiffsTotal != n || len(rep.Diffs) != reconcile.MaxDiffs {
		t.Fatalf("checked %d flagged %d diffs %d listed %d; want %d, %d, %d, %d",
			rep.Checked, rep.Flagged, rep.DiffsTotal, len(rep.Diffs), n, n, n, reconcile.MaxDiffs)
	}
	latest, err := r.Latest(context.Background())
	if err != nil || latest.ID != rep.ID || len(latest.Diffs) != reconcile.MaxDiffs || latest.Flagged != n ||
		latest.Diffs[0].Kind != reconcile.KindOrderMissing || latest.Diffs[0].OrderID != "gone-0" {
		t.Fatalf("stored report: %d diffs, flagged %d (%v)", len(latest.Diffs), latest.Flagged, err)
	}
	if got := f.count("reconciliation_diffs", "run_id = ?", rep.ID); got != reconcile.MaxDiffs {
		t.Fatalf("%d diff rows stored, want %d", got, reconcile.MaxDiffs)
	}
}

// A run that outlives RECONCILE_TIMEOUT stops, and its report says so.
func TestReconcile_TimeoutEndsTheRunAsFailedAndIsRecorded(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 10)
	p := f.paid("o-1", 100, time.Minute)
	f.order(p, reconcile.OrderPaid)
	f.fake.Delay(2 * time.Second)
	r := f.reconciler(func(c *reconcile.Config) { c.Timeout = 300 * time.Millisecond })
	start := time.Now()
	rep, err := r.RunNow(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Status != reconcile.Failed || !strings.Contains(rep.Error, "timed out after 300ms (RECONCILE_TIMEOUT)") ||
		time.Since(start) > 1500*time.Millisecond {
		t.Fatalf("report %+v after %v", rep, time.Since(start))
	}
	if latest, err := r.Latest(context.Background()); err != nil || latest.ID != rep.ID {
		t.Fatalf("latest %+v, %v", latest, err)
	}
}
