package reconcile

import (
	"testing"
	"time"

	"github.com/onceonly/onceonly/internal/payment"
)

// The payment side's policy, cell by cell: what is repaired, what is only
// flagged, and that a disagreeing amount is never repaired.
func TestClassify_EveryPairHasOneVerdict(t *testing.T) {
	t.Parallel()
	pay := func(st payment.Status) payment.Payment {
		return payment.Payment{ID: 1, OrderID: "o", Status: st, AmountCents: 100, Currency: "CNY"}
	}
	ord := func(st string) Order { return Order{ID: "o", Status: st, AmountCents: 100, Currency: "CNY"} }
	for _, c := range []struct {
		name  string
		p     payment.Payment
		o     Order
		found bool
		want  verdict
	}{
		{"order missing", pay(payment.Succeeded), Order{}, false, verdict{KindOrderMissing, planFlag}},
		{"pending order missing", pay(payment.Pending), Order{}, false, verdict{KindOrderMissing, planFlag}},
		{"pending, order waiting", pay(payment.Pending), ord(OrderPendingPayment), true, verdict{KindStuckPending, planQuery}},
		{"pending, order cancelled", pay(payment.Pending), ord(OrderCancelled), true, verdict{KindStuckPending, planQuery}},
		{"succeeded, paid", pay(payment.Succeeded), ord(OrderPaid), true, verdict{"", planMatch}},
		{"succeeded, waiting", pay(payment.Succeeded), ord(OrderPendingPayment), true, verdict{KindEventLost, planRedrive}},
		{"succeeded, cancelled", pay(payment.Succeeded), ord(OrderCancelled), true, verdict{KindPaidAfterCancel, planRefund}},
		{"succeeded, amount differs", pay(payment.Succeeded), Order{ID: "o", Status: OrderCancelled, AmountCents: 99, Currency: "CNY"}, true,
			verdict{KindAmountMismatch, planFlag}},
		{"succeeded, currency differs", pay(payment.Succeeded), Order{ID: "o", Status: OrderPendingPayment, AmountCents: 100, Currency: "USD"}, true,
			verdict{KindAmountMismatch, planFlag}},
		{"succeeded, unknown order state", pay(payment.Succeeded), ord("SHIPPED"), true, verdict{KindStateConflict, planFlag}},
		{"failed, waiting", pay(payment.Failed), ord(OrderPendingPayment), true, verdict{"", planMatch}},
		{"failed, paid by another attempt", pay(payment.Failed), ord(OrderPaid), true, verdict{"", planMatch}},
		{"failed, cancelled", pay(payment.Failed), ord(OrderCancelled), true, verdict{"", planMatch}},
		{"refunded, cancelled", pay(payment.Refunded), ord(OrderCancelled), true, verdict{"", planMatch}},
		{"refunded, paid", pay(payment.Refunded), ord(OrderPaid), true, verdict{KindRefundedButPaid, planFlag}},
		{"refunded, waiting", pay(payment.Refunded), ord(OrderPendingPayment), true, verdict{KindStateConflict, planFlag}},
		{"unknown payment state", pay("LOST"), ord(OrderPaid), true, verdict{KindStateConflict, planFlag}},
	} {
		if got := classify(c.p, c.o, c.found); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

// The order side judges a PAID order only when the payment side did not
// (its payment changed before the window), so no pair is counted twice.
func TestPaidOrderVerdict_JudgesWhatThePaymentSideDidNot(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	before, inside := start.Add(-time.Hour), start.Add(time.Minute)
	o := Order{ID: "o", Status: OrderPaid, AmountCents: 100, Currency: "CNY"}
	p := func(id int64, attempt int, st payment.Status, at time.Time) payment.Payment {
		return payment.Payment{ID: id, OrderID: "o", Attempt: attempt, Status: st, AmountCents: 100, Currency: "CNY", UpdatedAt: at}
	}
	for _, c := range []struct {
		name    string
		ps      []payment.Payment
		want    verdict
		about   int64
		covered bool
	}{
		{"no payment", nil, verdict{KindPaidWithoutPayment, planFlag}, 0, false},
		{"only a failed one", []payment.Payment{p(1, 1, payment.Failed, before)}, verdict{KindPaidWithoutPayment, planFlag}, 1, false},
		{"a pending one", []payment.Payment{p(1, 1, payment.Failed, before), p(2, 2, payment.Pending, inside)},
			verdict{KindPaidWithoutPayment, planFlag}, 2, false},
		{"succeeded before the window", []payment.Payment{p(1, 1, payment.Failed, before), p(2, 2, payment.Succeeded, before)},
			verdict{"", planMatch}, 2, false},
		{"succeeded in the window", []payment.Payment{p(2, 1, payment.Succeeded, inside)}, verdict{}, 2, true},
		{"succeeded at the window's start", []payment.Payment{p(2, 1, payment.Succeeded, start)}, verdict{}, 2, true},
		{"refunded before the window", []payment.Payment{p(3, 1, payment.Refunded, before)}, verdict{KindRefundedButPaid, planFlag}, 3, false},
		{"refunded in the window", []payment.Payment{p(3, 1, payment.Refunded, inside)}, verdict{}, 3, true},
	} {
		v, about, covered := paidOrderVerdict(o, c.ps, start.UnixMicro())
		var id int64
		if about != nil {
			id = about.ID
		}
		if v != c.want || id != c.about || covered != c.covered {
			t.Errorf("%s: %+v about %d covered %v; want %+v about %d covered %v", c.name, v, id, covered, c.want, c.about, c.covered)
		}
	}
}
