package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/onceonly/onceonly/internal/payment/reconcile"
	"github.com/onceonly/onceonly/internal/platform/testkit"
)

// 10 simultaneous triggers: one runs (200), the others are refused with 409
// reconciliation_in_progress, and one report is written.
func TestReconcile_ConcurrentTriggersRunOnce(t *testing.T) {
	t.Parallel()
	e, fake := reconEnv(t, options{})
	p := e.paid("o-1", 100)
	e.age(time.Minute, p.ID)
	fake.Put(fakeOrder(p, reconcile.OrderPaid, time.Now().Add(-time.Minute)))
	fake.Delay(300 * time.Millisecond) // the run holds the lock while the others arrive

	got := make([]resp, 10)
	race(10, func(i int) { got[i] = e.do(http.MethodPost, "/v1/reconciliations", "{}", bearer...) })
	codes := map[string]int{}
	for _, r := range got {
		switch r.status {
		case http.StatusOK:
			codes["200"]++
		case http.StatusConflict:
			codes[problemCode(r.body)]++
		default:
			t.Fatalf("answer %v", r)
		}
	}
	if codes["200"] != 1 || codes["reconciliation_in_progress"] != 9 {
		t.Fatalf("answers %v, want one 200 and nine 409 reconciliation_in_progress", codes)
	}
	if n := e.count("reconciliation_runs", ""); n != 1 {
		t.Fatalf("%d runs recorded, want 1", n)
	}
}

// Two instances on one schedule: each tick one of them runs and the other
// skips; their runs never overlap and every report has a newer fencing
// token than the one before.
func TestReconcile_TwoSchedulersRunOnePerTick(t *testing.T) {
	t.Parallel()
	fake := testkit.NewFakeOrders(t, internalToken)
	a := newEnv(t, options{ordersURL: fake.URL, schedule: 100 * time.Millisecond})
	b := newEnv(t, options{ordersURL: fake.URL, schedule: 100 * time.Millisecond, gdb: a.db,
		lockRedis: a.lockRedis, lockPrefix: a.lockPrefix})
	p := seedPaid(t, a.db, 1)[0]
	fake.Put(testkit.FakeOrder{ID: p.OrderID, Status: reconcile.OrderPaid, AmountCents: p.AmountCents, Currency: "CNY",
		UpdatedAt: p.UpdatedAt})
	fake.Delay(100 * time.Millisecond) // a run takes two calls: ≥ 200 ms, two ticks
	eventually(t, 20*time.Second, "six scheduled runs", func() bool { return a.count("reconciliation_runs", "") >= 6 })
	_ = a.m.Close()
	_ = b.m.Close()

	var runs []struct {
		ID                    int64
		FenceToken            int64
		StartedAt, FinishedAt time.Time
		Status                string
		Error                 *string
	}
	if err := a.db.Raw("SELECT id, fence_token, started_at, finished_at, status, error FROM reconciliation_runs ORDER BY id").
		Scan(&runs).Error; err != nil {
		t.Fatal(err)
	}
	succeeded := 0
	for i, r := range runs {
		switch {
		case r.Status == "succeeded":
			succeeded++
		case r.Error == nil || !strings.HasPrefix(*r.Error, "stopped (shutdown)"):
			// Only a run cut short by Close may fail (and say so).
			t.Fatalf("run %+v (%s)", r, deref(r.Error))
		}
		if r.ID != runs[0].ID+int64(i) {
			t.Fatalf("run ids %+v", runs)
		}
		if i > 0 {
			prev := runs[i-1]
			if !r.StartedAt.After(prev.FinishedAt) || r.FenceToken <= prev.FenceToken {
				t.Fatalf("runs overlap or reuse a token: %+v then %+v", prev, r)
			}
		}
	}
	if succeeded < 5 {
		t.Fatalf("%d of %d runs succeeded", succeeded, len(runs))
	}
	skipped := a.metric("onceonly_lock_contended_total", "job", "payment-reconciliation") +
		b.metric("onceonly_lock_contended_total", "job", "payment-reconciliation")
	if skipped == 0 {
		t.Fatal("no tick was skipped for the other instance's lock: were both scheduling?")
	}
	t.Logf("%d runs, %v ticks skipped for the other instance", len(runs), skipped)
}

// The order service is down (503, or nothing listening): the run ends
// failed with the reason and repairs nothing — not the lost event, not the
// late payment, not the stuck one. The next run, with the service back,
// repairs all three.
func TestReconcile_OrderServiceDownFailsTheRunAndRepairsNothing(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		down, up func(*testkit.FakeOrders, *testkit.Proxy)
		reason   string
	}{
		{"answers 503", func(f *testkit.FakeOrders, _ *testkit.Proxy) { f.Fail(http.StatusServiceUnavailable) },
			func(f *testkit.FakeOrders, _ *testkit.Proxy) { f.Fail(0) }, "503"},
		{"port closed", func(_ *testkit.FakeOrders, p *testkit.Proxy) { p.Cut() },
			func(_ *testkit.FakeOrders, p *testkit.Proxy) { p.Restore() }, "connection refused"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			fake := testkit.NewFakeOrders(t, internalToken)
			px := testkit.NewProxy(t, strings.TrimPrefix(fake.URL, "http://"))
			e := newEnv(t, options{ordersURL: "http://" + px.Addr})
			lost := e.paid("o-lost", 100)
			late := e.paid("o-late", 200)
			stuck := e.create("o-stuck", 300, "CNY")
			e.complete(stuck.ID, `{"status":"SUCCEEDED","deliver":false}`)
			if err := e.db.Exec("UPDATE outbox_events SET published_at = created_at").Error; err != nil {
				t.Fatal(err)
			}
			e.age(time.Minute, lost.ID, late.ID, stuck.ID)
			fake.Put(fakeOrder(lost, reconcile.OrderPendingPayment, time.Now().Add(-time.Minute)),
				fakeOrder(late, reconcile.OrderCancelled, time.Now().Add(-time.Minute)),
				fakeOrder(stuck, reconcile.OrderPendingPayment, time.Now().Add(-time.Minute)))

			c.down(fake, px)
			rep := e.reconcile()
			if rep.Status != "failed" || rep.Error == nil || !strings.Contains(*rep.Error, "order service") ||
				!strings.Contains(*rep.Error, c.reason) {
				t.Fatalf("run against a down order service: %+v (error %v)", rep, deref(rep.Error))
			}
			if rep.counts() != (counts{}) || len(rep.Diffs) != 0 {
				t.Fatalf("a failed run counted or repaired: %+v", rep)
			}
			if n := e.count("outbox_events", "published_at IS NULL"); n != 0 {
				t.Fatalf("%d events re-driven on a guess", n)
			}
			for id, st := range map[string]string{lost.ID: "SUCCEEDED", late.ID: "SUCCEEDED", stuck.ID: "PENDING"} {
				if r := e.row(id); r.Status != st {
					t.Fatalf("payment %s is %s after a failed run, want %s", id, r.Status, st)
				}
			}
			e.assertRefunds(e.payment(late.ID), 0)
			if l := e.latest(); l.ID != rep.ID || l.Status != "failed" || deref(l.Error) != deref(rep.Error) {
				t.Fatalf("latest %+v, want the failed run", l)
			}

			c.up(fake, px)
			next := e.reconcile()
			if next.Status != "succeeded" || next.counts() != (counts{checked: 3, republished: 1, queried: 1, refunded: 1}) {
				t.Fatalf("run after the order service came back: %+v", next)
			}
		})
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}
