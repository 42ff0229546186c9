package store_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"

	"github.com/onceonly/onceonly/internal/order"
	"github.com/onceonly/onceonly/internal/order/store"
	"github.com/onceonly/onceonly/internal/platform/testkit"
)

type fixture struct {
	s   *store.Store
	db  *gorm.DB
	reg *prometheus.Registry
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	gdb := testkit.DB(t, 20, store.Migrations()...)
	reg := prometheus.NewRegistry()
	s, err := store.New(gdb, reg)
	if err != nil {
		t.Fatal(err)
	}
	return fixture{s, gdb, reg}
}

var ctx = context.Background()

func (f fixture) create(t *testing.T, user, token string) order.Order {
	t.Helper()
	o := order.Order{UserID: user, Status: order.PendingPayment, AmountCents: 700, Currency: "CNY",
		Items: []order.Item{{SKU: "apple", Quantity: 2, PriceCents: 350}}, SubmitToken: token, BodyHash: strings.Repeat("a", 64)}
	if err := f.s.Create(ctx, &o); err != nil {
		t.Fatalf("create: %v", err)
	}
	return o
}

func (f fixture) get(t *testing.T, id int64) order.Order {
	t.Helper()
	o, err := f.s.Get(ctx, "", id)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func TestCreate_RoundTripsAndStampsVersionAndTimes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	o := f.create(t, "alice", "TOKEN0000000000001")
	got := f.get(t, o.ID)
	if got.ID == 0 || got.Version != 1 || got.PaymentID != "" || got.Items[0] != o.Items[0] || got.BodyHash != o.BodyHash ||
		got.CreatedAt.Location() != time.UTC || !got.CreatedAt.Equal(o.CreatedAt) || !got.UpdatedAt.Equal(o.CreatedAt) {
		t.Fatalf("stored %+v, read back %+v", o, got)
	}
}

func TestCreate_SecondOrderWithTheSameTokenIsErrDuplicateSubmit(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.create(t, "alice", "TOKEN0000000000001")
	o := order.Order{UserID: "alice", Status: order.PendingPayment, Currency: "CNY", SubmitToken: "TOKEN0000000000001", BodyHash: "b"}
	if err := f.s.Create(ctx, &o); !errors.Is(err, order.ErrDuplicateSubmit) {
		t.Fatalf("second insert: %v, want ErrDuplicateSubmit", err)
	}
}

// MySQL's default collation is case-insensitive; user ids and tokens are
// not: "Alice" is another user, and a lower-cased token another token.
func TestLookups_UserAndTokenAreCaseSensitive(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	o := f.create(t, "alice", "TOKENABCDEFGHIJKLM")
	if _, err := f.s.BySubmitToken(ctx, "Alice", o.SubmitToken); !errors.Is(err, order.ErrNotFound) {
		t.Errorf("user Alice found alice's order: %v", err)
	}
	if _, err := f.s.BySubmitToken(ctx, "alice", strings.ToLower(o.SubmitToken)); !errors.Is(err, order.ErrNotFound) {
		t.Errorf("lower-cased token found the order: %v", err)
	}
	if _, err := f.s.Get(ctx, "ALICE", o.ID); !errors.Is(err, order.ErrNotFound) {
		t.Errorf("user ALICE got alice's order: %v", err)
	}
	f.create(t, "alice", strings.ToLower(o.SubmitToken)) // not a duplicate
	if os, err := f.s.List(ctx, order.ListQuery{UserID: "Alice", Limit: 10}); err != nil || len(os) != 0 {
		t.Errorf("Alice lists %d orders (%v)", len(os), err)
	}
}

func TestTransition_OneConditionalUpdateBumpsVersionByOne(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	o := f.create(t, "alice", "TOKEN0000000000001")
	time.Sleep(2 * time.Millisecond)
	if err := f.s.Transition(ctx, o.ID, order.PendingPayment, order.Paid, &order.Extra{Set: map[string]any{"payment_id": "pay-1"}}); err != nil {
		t.Fatal(err)
	}
	got := f.get(t, o.ID)
	if got.Status != order.Paid || got.Version != 2 || got.PaymentID != "pay-1" || !got.UpdatedAt.After(o.UpdatedAt) || !got.CreatedAt.Equal(o.CreatedAt) {
		t.Fatalf("after PENDING→PAID: %+v", got)
	}
	// The state moved on: a transition from the old state changes nothing.
	err := f.s.Transition(ctx, o.ID, order.PendingPayment, order.Cancelled, nil)
	if !errors.Is(err, order.ErrConflict) {
		t.Fatalf("stale transition: %v, want ErrConflict", err)
	}
	if again := f.get(t, o.ID); again.Status != order.Paid || again.Version != 2 {
		t.Fatalf("a refused transition changed the row: %+v", again)
	}
	if n := counterValue(t, f.reg, "CANCELLED"); n != 1 {
		t.Errorf("cas_conflicts_total{to=CANCELLED} = %v, want 1", n)
	}
	if err := f.s.Transition(ctx, 999999, order.PendingPayment, order.Cancelled, nil); !errors.Is(err, order.ErrConflict) {
		t.Errorf("unknown order: %v, want ErrConflict", err)
	}
}

func TestTransition_EdgesOutsideTheTableAndForbiddenColumnsSendNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	o := f.create(t, "alice", "TOKEN0000000000001")
	for _, e := range [][2]order.Status{{order.Paid, order.Cancelled}, {order.Cancelled, order.PendingPayment}, {order.PendingPayment, order.PendingPayment}, {"NEW", order.Paid}} {
		if err := f.s.Transition(ctx, o.ID, e[0], e[1], nil); !errors.Is(err, order.ErrIllegalTransition) {
			t.Errorf("%s → %s: %v, want ErrIllegalTransition", e[0], e[1], err)
		}
	}
	for _, col := range []string{"status", "version", "user_id", "amount_cents", "updated_at"} {
		err := f.s.Transition(ctx, o.ID, order.PendingPayment, order.Paid, &order.Extra{Set: map[string]any{col: "x"}})
		if err == nil || errors.Is(err, order.ErrConflict) {
			t.Errorf("Set %s: %v, want refused", col, err)
		}
	}
	if got := f.get(t, o.ID); got.Status != order.PendingPayment || got.Version != 1 {
		t.Fatalf("row changed: %+v", got)
	}
}

func TestTransition_OwnerScopedChangeMatchesOnlyTheOwner(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	o := f.create(t, "alice", "TOKEN0000000000001")
	if err := f.s.Transition(ctx, o.ID, order.PendingPayment, order.Cancelled, &order.Extra{OwnerID: "bob"}); !errors.Is(err, order.ErrConflict) {
		t.Fatalf("bob cancelling alice's order: %v", err)
	}
	if err := f.s.Transition(ctx, o.ID, order.PendingPayment, order.Cancelled, &order.Extra{OwnerID: "alice"}); err != nil {
		t.Fatal(err)
	}
}

// Racing transitions out of one state: the payment and the timeout closer
// (and users) all try at once; exactly one edge is taken.
func TestTransition_ConcurrentTransitionsExactlyOneWins(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	o := f.create(t, "alice", "TOKEN0000000000001")
	const n = 40
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			to := order.Cancelled
			if i%2 == 0 {
				to = order.Paid
			}
			errs[i] = f.s.Transition(ctx, o.ID, order.PendingPayment, to, nil)
		}()
	}
	close(start)
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, order.ErrConflict):
			t.Fatalf("unexpected error: %v", err)
		}
	}
	if got := f.get(t, o.ID); won != 1 || got.Version != 2 {
		t.Fatalf("%d transitions won, version %d; want 1 and 2", won, got.Version)
	}
}

// A caller commits a transition together with its own rows (the consumer's
// consumed_events, a job's fence check): rolled back, it never happened.
func TestTransition_WithTxRollsBackWithTheTransaction(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	o := f.create(t, "alice", "TOKEN0000000000001")
	boom := errors.New("rollback")
	err := f.db.Transaction(func(tx *gorm.DB) error {
		if err := f.s.WithTx(tx).Transition(ctx, o.ID, order.PendingPayment, order.Paid, nil); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("transaction: %v", err)
	}
	if got := f.get(t, o.ID); got.Status != order.PendingPayment || got.Version != 1 {
		t.Fatalf("rolled-back transition is visible: %+v", got)
	}
}

// Keyset pages over (updated_at, id) must neither skip nor repeat rows that
// share an updated_at, on both dialects' time encodings.
func TestListUpdated_KeysetTiebreaksOnIDForEqualTimes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var want []int64
	for i := range 7 {
		want = append(want, f.create(t, "alice", "TOKEN000000000000"+string(rune('A'+i))).ID)
	}
	same := time.Date(2026, 5, 1, 12, 0, 0, 500_000_000, time.UTC)
	if err := f.db.Exec("UPDATE orders SET updated_at = ? WHERE id IN ?", same, want[2:6]).Error; err != nil {
		t.Fatal(err)
	}
	if err := f.db.Exec("UPDATE orders SET updated_at = ? WHERE id IN ?", same.Add(-time.Second), want[:2]).Error; err != nil {
		t.Fatal(err)
	}
	q := order.UpdatedQuery{From: same.Add(-time.Hour), To: time.Now().Add(time.Hour), Limit: 2}
	var got []int64
	for range 10 {
		page, err := f.s.ListUpdated(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range page {
			got = append(got, o.ID)
		}
		if len(page) < q.Limit {
			break
		}
		last := page[len(page)-1]
		q.After = &order.UpdatedKey{UpdatedAt: last.UpdatedAt, ID: last.ID}
	}
	if len(got) != len(want) {
		t.Fatalf("pages gave %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("pages gave %v, want %v", got, want)
		}
	}
	// The window is half-open: To excludes a row updated exactly then.
	q = order.UpdatedQuery{From: same.Add(-time.Hour), To: same, Limit: 100}
	if page, err := f.s.ListUpdated(ctx, q); err != nil || len(page) != 2 {
		t.Fatalf("window before %v: %d rows (%v), want 2", same, len(page), err)
	}
}

func counterValue(t *testing.T, reg *prometheus.Registry, to string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "onceonly_order_cas_conflicts_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "to" && l.GetValue() == to {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no cas_conflicts_total{to=%s}", to)
	return 0
}
