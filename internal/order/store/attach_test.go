package store_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/onceonly/onceonly/internal/order"
	"github.com/onceonly/onceonly/internal/order/store"
)

func TestAttachPayment_KeepsTheStatusAndMovesVersionOnlyWhenTheIDChanges(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	o := f.create(t, "alice", "TOKEN0000000000001")
	if err := f.s.AttachPayment(ctx, o.ID, "pay-1"); err != nil {
		t.Fatal(err)
	}
	if got := f.get(t, o.ID); got.Status != order.PendingPayment || got.PaymentID != "pay-1" || got.Version != 2 {
		t.Fatalf("after attach: %+v", got)
	}
	// The same payment again: nil, and nothing written.
	if err := f.s.AttachPayment(ctx, o.ID, "pay-1"); err != nil {
		t.Fatal(err)
	}
	if got := f.get(t, o.ID); got.Version != 2 {
		t.Fatalf("a repeated attach moved the version to %d", got.Version)
	}
	// The next attempt after a FAILED one replaces it.
	if err := f.s.AttachPayment(ctx, o.ID, "pay-2"); err != nil {
		t.Fatal(err)
	}
	if got := f.get(t, o.ID); got.PaymentID != "pay-2" || got.Version != 3 {
		t.Fatalf("after the second attempt: %+v", got)
	}
	// No longer PENDING_PAYMENT: refused, unchanged.
	if err := f.s.Transition(ctx, o.ID, order.PendingPayment, order.Cancelled, nil); err != nil {
		t.Fatal(err)
	}
	if err := f.s.AttachPayment(ctx, o.ID, "pay-3"); !errors.Is(err, order.ErrConflict) {
		t.Fatalf("attach to a cancelled order: %v, want ErrConflict", err)
	}
	if got := f.get(t, o.ID); got.PaymentID != "pay-2" || got.Version != 4 {
		t.Fatalf("a refused attach changed the order: %+v", got)
	}
	if err := f.s.AttachPayment(ctx, 999999, "pay-1"); !errors.Is(err, order.ErrConflict) {
		t.Fatalf("unknown order: %v, want ErrConflict", err)
	}
}

// The closer's keyset pages neither skip nor repeat orders that share a
// created_at, and see only PENDING_PAYMENT orders older than the cutoff.
func TestPendingBefore_KeysetPagesEveryExpiredPendingOrderOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	same := time.Date(2026, 5, 1, 12, 0, 0, 500_000_000, time.UTC)
	var want []int64
	for i := range 7 {
		o := f.create(t, "alice", fmt.Sprintf("TOKENPENDING%06d", i))
		want = append(want, o.ID)
	}
	paid := f.create(t, "alice", "TOKENPAID0000001")
	fresh := f.create(t, "alice", "TOKENFRESH000001")
	if err := f.db.Exec("UPDATE orders SET created_at = ? WHERE id IN ?", same, append(want[2:], paid.ID)).Error; err != nil {
		t.Fatal(err)
	}
	if err := f.db.Exec("UPDATE orders SET created_at = ? WHERE id IN ?", same.Add(-time.Second), want[:2]).Error; err != nil {
		t.Fatal(err)
	}
	if err := f.s.Transition(ctx, paid.ID, order.PendingPayment, order.Paid, nil); err != nil {
		t.Fatal(err)
	}
	var got []int64
	var after *store.CreatedKey
	for range 10 {
		page, err := f.s.PendingBefore(ctx, same.Add(time.Minute), after, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range page {
			got = append(got, k.ID)
		}
		if len(page) < 2 {
			break
		}
		after = &page[len(page)-1]
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("pages gave %v, want %v (not the PAID %d nor the fresh %d)", got, want, paid.ID, fresh.ID)
	}
}
