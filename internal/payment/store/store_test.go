package store_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/onceonly/onceonly/internal/payment"
	"github.com/onceonly/onceonly/internal/payment/events"
	"github.com/onceonly/onceonly/internal/payment/store"
	"github.com/onceonly/onceonly/internal/platform/lock"
	"github.com/onceonly/onceonly/internal/platform/outbox"
	"github.com/onceonly/onceonly/internal/platform/testkit"
)

func newStore(t *testing.T) (*store.Store, *gorm.DB) {
	t.Helper()
	migs := append(append(store.Migrations(), outbox.Migrations()...), lock.Migrations()...)
	gdb := testkit.DB(t, 20, migs...)
	s, err := store.New(gdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s, gdb
}

func newPayment(t *testing.T, s *store.Store, order string, attempt int) payment.Payment {
	t.Helper()
	p := payment.Payment{OrderID: order, UserID: "u", Attempt: attempt, Status: payment.Pending, AmountCents: 100, Currency: "CNY"}
	if err := s.Create(context.Background(), &p); err != nil {
		t.Fatal(err)
	}
	return p
}

func event(p payment.Payment, typ, id string) *events.Event {
	return &events.Event{SchemaVersion: 1, EventID: id, Type: typ, PaymentID: payment.FormatID(p.ID),
		OrderID: p.OrderID, AmountCents: p.AmountCents, Currency: p.Currency, OccurredAt: time.Now().UTC()}
}

func count(t *testing.T, gdb *gorm.DB, table string) int64 {
	t.Helper()
	var n int64
	if err := gdb.Table(table).Count(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

func TestCreate_SecondRowForAnAttemptIsErrDuplicate(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	first := newPayment(t, s, "o-1", 1)
	dup := payment.Payment{OrderID: "o-1", UserID: "u", Attempt: 1, Status: payment.Pending, AmountCents: 100, Currency: "CNY"}
	if err := s.Create(ctx, &dup); !errors.Is(err, payment.ErrDuplicate) {
		t.Fatalf("second attempt 1: %v, want ErrDuplicate", err)
	}
	second := newPayment(t, s, "o-1", 2)
	if latest, err := s.Latest(ctx, "o-1"); err != nil || latest.ID != second.ID || latest.Attempt != 2 {
		t.Fatalf("Latest = %+v, %v; want attempt 2", latest, err)
	}
	if got, err := s.Get(ctx, first.ID); err != nil || got.Version != 1 || got.Status != payment.Pending {
		t.Fatalf("Get = %+v, %v", got, err)
	}
	if _, err := s.Latest(ctx, "O-1"); !errors.Is(err, payment.ErrNotFound) {
		t.Fatalf("order ids are case-sensitive; Latest(O-1) = %v", err)
	}
}

// An edge outside the state machine is refused before any statement.
func TestTransition_IllegalEdgeIsRefusedAndChangesNothing(t *testing.T) {
	t.Parallel()
	s, gdb := newStore(t)
	p := newPayment(t, s, "o-1", 1)
	for _, e := range [][2]payment.Status{{payment.Pending, payment.Refunded}, {payment.Failed, payment.Succeeded},
		{payment.Refunded, payment.Pending}, {payment.Succeeded, payment.Failed}} {
		err := s.Transition(context.Background(), p.ID, e[0], e[1], payment.Change{Event: event(p, events.TypeSucceeded, "ev-"+string(e[1]))})
		if !errors.Is(err, payment.ErrIllegalTransition) {
			t.Errorf("%s → %s: %v, want ErrIllegalTransition", e[0], e[1], err)
		}
	}
	if got, _ := s.Get(context.Background(), p.ID); got.Status != payment.Pending || got.Version != 1 {
		t.Fatalf("payment %+v", got)
	}
	if n := count(t, gdb, "outbox_events"); n != 0 {
		t.Fatalf("%d outbox rows", n)
	}
}

// SUCCEEDED → REFUNDED (issue 7's refund) happens once under concurrency,
// with its refund key and exactly one payment.refunded event.
func TestTransition_ConcurrentRefundsApplyOnceWithOneEvent(t *testing.T) {
	t.Parallel()
	s, gdb := newStore(t)
	ctx := context.Background()
	p := newPayment(t, s, "o-1", 1)
	if err := s.Transition(ctx, p.ID, payment.Pending, payment.Succeeded, payment.Change{GatewayTxnID: "txn-1",
		Event: event(p, events.TypeSucceeded, "ev-ok")}); err != nil {
		t.Fatal(err)
	}
	const n = 10
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			errs[i] = s.Transition(ctx, p.ID, payment.Succeeded, payment.Refunded, payment.Change{
				RefundKey: "refund-1", Event: event(p, events.TypeRefunded, "ev-refund-"+string(rune('a'+i)))})
		})
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, payment.ErrConflict):
			t.Fatalf("refund: %v", err)
		}
	}
	if won != 1 {
		t.Fatalf("%d refunds applied, want 1", won)
	}
	got, _ := s.Get(ctx, p.ID)
	if got.Status != payment.Refunded || got.Version != 3 || got.RefundKey != "refund-1" || got.GatewayTxnID != "txn-1" {
		t.Fatalf("payment %+v", got)
	}
	var refunded int64
	gdb.Raw("SELECT COUNT(*) FROM outbox_events WHERE headers LIKE ?", `%"payment.refunded"%`).Scan(&refunded)
	if total := count(t, gdb, "outbox_events"); total != 2 || refunded != 1 {
		t.Fatalf("%d outbox rows (%d refunded), want 2 (1)", total, refunded)
	}
}

// The transition and its event share one transaction: when the outbox
// INSERT fails (here: an event id already used), the UPDATE is rolled back
// with it. This holds on SQLite as on MariaDB.
func TestTransition_FailedOutboxInsertRollsBackTheStatusChange(t *testing.T) {
	t.Parallel()
	s, gdb := newStore(t)
	ctx := context.Background()
	a, b := newPayment(t, s, "o-a", 1), newPayment(t, s, "o-b", 1)
	if err := s.Transition(ctx, a.ID, payment.Pending, payment.Succeeded, payment.Change{Event: event(a, events.TypeSucceeded, "ev-1")}); err != nil {
		t.Fatal(err)
	}
	err := s.Transition(ctx, b.ID, payment.Pending, payment.Succeeded, payment.Change{GatewayTxnID: "txn-b", Event: event(b, events.TypeSucceeded, "ev-1")})
	if err == nil || !errors.Is(err, gorm.ErrDuplicatedKey) {
		t.Fatalf("transition with a duplicate event id: %v", err)
	}
	if got, _ := s.Get(ctx, b.ID); got.Status != payment.Pending || got.Version != 1 || got.GatewayTxnID != "" {
		t.Fatalf("payment b %+v: the UPDATE survived its failed transaction", got)
	}
	if n := count(t, gdb, "outbox_events"); n != 1 {
		t.Fatalf("%d outbox rows, want 1", n)
	}
}
