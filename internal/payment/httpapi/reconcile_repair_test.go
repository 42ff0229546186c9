package httpapi_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/onceonly/onceonly/internal/payment"
	"github.com/onceonly/onceonly/internal/payment/events"
	"github.com/onceonly/onceonly/internal/payment/reconcile"
	"github.com/onceonly/onceonly/internal/platform/testkit"
)

// Lost events: of 1,000 paid payments, the events of 50 were "dropped" (their
// outbox rows marked published, never sent) and their orders are still
// PENDING_PAYMENT. One run re-drives exactly those 50: their rows become
// unpublished again and reach the topic with their original event ids.
// Once the order service reports them PAID, a second run finds nothing.
func TestReconcile_LostEventsAreRepublishedOnceWithTheirOriginalEventIDs(t *testing.T) {
	t.Parallel()
	e, fake := reconEnv(t, options{relay: true})
	pays := seedPaid(t, e.db, 1000)
	lost := map[string]seeded{}
	for i, p := range pays {
		status := reconcile.OrderPaid
		if i%20 == 7 {
			status = reconcile.OrderPendingPayment
			lost[p.ID] = p
		}
		fake.Put(testkit.FakeOrder{ID: p.OrderID, Status: status, PaymentID: p.ID, AmountCents: p.AmountCents,
			Currency: "CNY", UpdatedAt: p.UpdatedAt.Add(time.Second)})
	}

	rep := e.reconcile()
	if rep.Status != "succeeded" || rep.Error != nil || rep.counts() != (counts{checked: 1000, matched: 950, republished: 50}) {
		t.Fatalf("first run: %+v", rep)
	}
	if len(rep.Diffs) != 50 {
		t.Fatalf("%d diffs, want 50", len(rep.Diffs))
	}
	for _, d := range rep.Diffs {
		p, ok := lost[*d.PaymentID]
		if !ok || d.Kind != "event_lost" || d.Action != "republished" || d.OrderID != p.OrderID {
			t.Fatalf("diff %+v is not one of the 50 lost events", d)
		}
	}
	if fake.MaxBatch() > 500 || fake.BatchCalls() != 2 {
		t.Errorf("batch-get: %d calls, at most %d ids; want 2 calls of at most 500", fake.BatchCalls(), fake.MaxBatch())
	}

	// The relay publishes the 50 rows again; nothing else reaches the topic.
	eventually(t, 20*time.Second, "the 50 re-driven events to be published",
		func() bool { return e.count("outbox_events", "published_at IS NULL") == 0 })
	onTopic := readTopic(t, e.brokers)
	var got []string
	for _, rec := range onTopic {
		p, ok := lost[rec.Event.PaymentID]
		if !ok || rec.Event.EventID != p.EventID || rec.Headers["event_id"] != p.EventID || rec.Key != p.OrderID ||
			rec.Event.Type != events.TypeSucceeded {
			t.Fatalf("unexpected record on %s: %+v (key %q, headers %v)", events.Topic, rec.Event, rec.Key, rec.Headers)
		}
		got = append(got, rec.Event.EventID)
	}
	slices.Sort(got)
	if len(got) != 50 || len(slices.Compact(got)) != 50 {
		t.Fatalf("%d records (%d distinct event ids) on the topic, want the 50 originals", len(onTopic), len(got))
	}

	// The consumer applied them: the order service reports them PAID.
	for _, p := range lost {
		fake.SetStatus(reconcile.OrderPaid, p.OrderID)
	}
	again := e.reconcile()
	if again.Status != "succeeded" || again.counts() != (counts{checked: 1000, matched: 1000}) || len(again.Diffs) != 0 {
		t.Fatalf("second run: %+v", again)
	}
	if l := e.latest(); l.ID != again.ID || l.counts() != again.counts() {
		t.Fatalf("latest %+v, want the second run %+v", l, again)
	}
	if got := e.metric("onceonly_reconcile_repairs_total", "kind", "republished"); got != 50 {
		t.Errorf("repairs_total{republished} = %v, want 50", got)
	}
	if got := e.metric("onceonly_reconcile_diffs_total", "kind", "event_lost"); got != 50 {
		t.Errorf("diffs_total{event_lost} = %v, want 50", got)
	}
	if got := e.metric("onceonly_reconcile_runs_total", "status", "succeeded"); got != 2 {
		t.Errorf("runs_total{succeeded} = %v, want 2", got)
	}
}

// A re-drive finds the event's row pruned: the event is rebuilt from the
// payment with its original id. A run while it still waits in the outbox
// changes nothing: that repair is under way.
func TestReconcile_PrunedEventIsReinsertedWithItsOriginalEventID(t *testing.T) {
	t.Parallel()
	e, fake := reconEnv(t, options{})
	p := e.paid("o-pruned", 2500)
	e.age(time.Minute, p.ID)
	pay := e.payment(p.ID)
	if pay.EventID == "" {
		t.Fatal("the payment does not record its event id")
	}
	if err := e.db.Exec("DELETE FROM outbox_events WHERE event_id = ?", pay.EventID).Error; err != nil {
		t.Fatal(err)
	}
	fake.Put(fakeOrder(p, reconcile.OrderPendingPayment, pay.UpdatedAt))

	rep := e.reconcile()
	if rep.counts() != (counts{checked: 1, republished: 1}) || len(rep.Diffs) != 1 ||
		rep.Diffs[0].String() != "event_lost "+p.ID+" o-pruned reinserted" {
		t.Fatalf("run: %+v", rep)
	}
	var ob struct {
		Payload     []byte
		Headers     string
		MsgKey      string
		Unpublished bool
	}
	if err := e.db.Raw("SELECT payload, headers, msg_key, published_at IS NULL AS unpublished FROM outbox_events WHERE event_id = ?",
		pay.EventID).Scan(&ob).Error; err != nil {
		t.Fatal(err)
	}
	var ev events.Event
	mustJSON(t, ob.Payload, &ev)
	want := payment.EventOf(pay, payment.Succeeded, pay.UpdatedAt, pay.EventID)
	if !ob.Unpublished || ob.MsgKey != p.OrderID || ev != want || !strings.Contains(ob.Headers, `"type":"payment.succeeded"`) {
		t.Fatalf("re-inserted row %+v, event %+v; want %+v", ob, ev, want)
	}
	again := e.reconcile()
	if again.counts() != (counts{checked: 1}) || len(again.Diffs) != 1 || again.Diffs[0].Action != "already_queued" {
		t.Fatalf("run while the event waits in the outbox: %+v", again)
	}
	if n := e.count("outbox_events", "event_id = ?", pay.EventID); n != 1 {
		t.Fatalf("%d rows of the event, want 1", n)
	}
}

// A payment succeeds after its order was cancelled: the run refunds it once
// at the gateway (by its refund key), marks it REFUNDED and writes one
// payment.refunded event; a second run does nothing more.
func TestReconcile_PaidAfterCancelIsRefundedOnce(t *testing.T) {
	t.Parallel()
	e, fake := reconEnv(t, options{})
	p := e.paid("o-late", 4200)
	e.age(time.Minute, p.ID)
	fake.Put(fakeOrder(p, reconcile.OrderCancelled, time.Now().Add(-5*time.Minute)))

	rep := e.reconcile()
	if rep.counts() != (counts{checked: 1, refunded: 1}) || len(rep.Diffs) != 1 ||
		rep.Diffs[0].String() != "paid_after_cancel "+p.ID+" o-late refunded" {
		t.Fatalf("run: %+v", rep)
	}
	pay := e.payment(p.ID)
	if pay.Status != payment.Refunded || pay.RefundKey != payment.RefundKeyOf(pay) || pay.Version != 3 {
		t.Fatalf("payment %+v, want REFUNDED with its refund key at version 3", pay)
	}
	e.assertRefunds(pay, 1)
	if n := e.count("outbox_events", "headers LIKE ?", `%"payment.refunded"%`); n != 1 {
		t.Fatalf("%d payment.refunded rows, want 1", n)
	}

	e.age(time.Minute, p.ID) // back in the window
	again := e.reconcile()
	if again.counts() != (counts{checked: 1, matched: 1}) || len(again.Diffs) != 0 {
		t.Fatalf("second run: %+v", again)
	}
	e.assertRefunds(pay, 1)
	if n := e.count("outbox_events", ""); n != 2 {
		t.Fatalf("%d outbox rows, want 2 (succeeded, refunded)", n)
	}
	if o, _ := fake.Order(p.OrderID); o.Status != reconcile.OrderCancelled {
		t.Fatalf("order %+v", o)
	}
}

// The process died after the gateway refunded but before REFUNDED was
// written (here: the gateway already holds the refund). The next run
// refunds again with the same key — the gateway refunds once — and marks it.
func TestReconcile_RefundInterruptedBeforeItsCASIsFinishedWithTheSameKey(t *testing.T) {
	t.Parallel()
	e, fake := reconEnv(t, options{})
	p := e.paid("o-crash", 700)
	e.age(time.Minute, p.ID)
	fake.Put(fakeOrder(p, reconcile.OrderCancelled, time.Now().Add(-5*time.Minute)))
	pay := e.payment(p.ID)
	if err := e.m.Gateway.Refund(t.Context(), pay, payment.RefundKeyOf(pay)); err != nil {
		t.Fatal(err)
	}
	rep := e.reconcile()
	if rep.counts() != (counts{checked: 1, refunded: 1}) {
		t.Fatalf("run: %+v", rep)
	}
	e.assertRefunds(pay, 1)
	if got := e.payment(p.ID); got.Status != payment.Refunded {
		t.Fatalf("payment %+v", got)
	}
}

func (e *env) assertRefunds(p payment.Payment, want int64) {
	e.t.Helper()
	n, err := e.m.Simulator.Refunds(e.t.Context(), p.ID)
	if err != nil || n != want {
		e.t.Fatalf("the gateway holds %d refunds of payment %d (%v), want %d", n, p.ID, err, want)
	}
}

// A PENDING payment past the grace period whose callback was lost: the
// gateway holds SUCCEEDED (deliver:false). One run queries it and applies
// the answer through the callback path, once; a PENDING answer changes
// nothing; a payment within the grace period is not touched at all.
func TestReconcile_StuckPendingIsQueriedAndAppliedOnce(t *testing.T) {
	t.Parallel()
	e, fake := reconEnv(t, options{})
	held := e.create("o-held", 1500, "CNY")
	c := e.complete(held.ID, `{"status":"SUCCEEDED","deliver":false}`)
	none := e.create("o-none", 1600, "CNY")
	fresh := e.create("o-fresh", 1700, "CNY") // within the grace period
	e.age(time.Minute, held.ID, none.ID)
	for _, p := range []paymentJSON{held, none, fresh} {
		fake.Put(fakeOrder(p, reconcile.OrderPendingPayment, time.Now().Add(-time.Minute)))
	}

	rep := e.reconcile()
	if rep.counts() != (counts{checked: 2, queried: 2}) {
		t.Fatalf("run: %+v", rep)
	}
	diffs := map[string]diffJSON{}
	for _, d := range rep.Diffs {
		diffs[*d.PaymentID] = d
	}
	if diffs[held.ID].Action != "applied" || diffs[none.ID].Action != "no_outcome" ||
		diffs[held.ID].Kind != "stuck_pending" || diffs[none.ID].Kind != "stuck_pending" || len(diffs) != 2 {
		t.Fatalf("diffs %+v", rep.Diffs)
	}
	if got := e.get(held.ID); got.Status != "SUCCEEDED" || got.GatewayTxnID == nil || *got.GatewayTxnID != c.GatewayTxnID {
		t.Fatalf("held payment %+v, want SUCCEEDED with %s", got, c.GatewayTxnID)
	}
	if got := e.row(none.ID); got.Status != "PENDING" || got.Version != 1 {
		t.Fatalf("payment without an outcome %+v, want untouched PENDING", got)
	}
	if got := e.row(fresh.ID); got.Status != "PENDING" || got.Version != 1 {
		t.Fatalf("fresh payment %+v", got)
	}
	if n := e.count("outbox_events", "msg_key = ? AND headers LIKE ?", held.OrderID, `%"payment.succeeded"%`); n != 1 ||
		e.count("outbox_events", "") != 1 {
		t.Fatalf("%d payment.succeeded rows of the held payment (%d in all), want exactly 1", n, e.count("outbox_events", ""))
	}
	if got := e.metric("onceonly_payment_callbacks_total", "result", "processed"); got != 1 {
		t.Errorf("callbacks_total{processed} = %v, want 1 (the queried outcome took the callback's path)", got)
	}

	// The event reached the order: a second run repairs nothing.
	fake.SetStatus(reconcile.OrderPaid, held.OrderID)
	e.age(time.Minute, held.ID)
	again := e.reconcile()
	if again.counts() != (counts{checked: 2, matched: 1, queried: 1}) || len(again.Diffs) != 1 || again.Diffs[0].Action != "no_outcome" {
		t.Fatalf("second run: %+v", again)
	}
	if n := e.count("outbox_events", ""); n != 1 {
		t.Fatalf("%d outbox rows after the second run, want 1", n)
	}
}
