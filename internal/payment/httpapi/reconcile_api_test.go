package httpapi_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/onceonly/onceonly/internal/payment"
	"github.com/onceonly/onceonly/internal/payment/reconcile"
	"github.com/onceonly/onceonly/internal/platform/testkit"
)

// A PAID order without a SUCCEEDED payment is flagged and left as it is —
// so is one whose payment was refunded. The report has DESIGN.md's shape.
func TestReconcile_PaidOrderWithoutPaymentIsFlaggedAndNotModified(t *testing.T) {
	t.Parallel()
	e, fake := reconEnv(t, options{})
	// An old payment (outside the window) of a PAID order, and one refunded.
	ok := e.paid("o-ok", 500)
	refunded := e.paid("o-refunded", 600)
	pr := e.payment(refunded.ID)
	if err := e.m.Store.Transition(t.Context(), pr.ID, payment.Succeeded, payment.Refunded,
		payment.Change{RefundKey: payment.RefundKeyOf(pr)}); err != nil {
		t.Fatal(err)
	}
	e.age(2*time.Hour, ok.ID, refunded.ID)
	recent := time.Now().UTC().Add(-time.Minute).Truncate(time.Microsecond)
	orphan := testkit.FakeOrder{ID: "o-orphan", Status: reconcile.OrderPaid, AmountCents: 900, Currency: "CNY", UpdatedAt: recent}
	fake.Put(orphan, fakeOrder(ok, reconcile.OrderPaid, recent), fakeOrder(refunded, reconcile.OrderPaid, recent))

	r := e.do(http.MethodPost, "/v1/reconciliations", "", bearer...)
	if r.status != http.StatusOK {
		t.Fatalf("POST: %v", r)
	}
	var raw map[string]json.RawMessage
	mustJSON(t, r.body, &raw)
	var keys []string
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if fmt.Sprint(keys) != "[checked diffs error flagged id matched queried refunded republished status window_end window_start]" {
		t.Fatalf("report keys %v", keys)
	}
	var rep reportJSON
	mustJSON(t, r.body, &rep)
	start, err1 := time.Parse(time.RFC3339, rep.WindowStart)
	end, err2 := time.Parse(time.RFC3339, rep.WindowEnd)
	if err1 != nil || err2 != nil || !strings.HasSuffix(rep.WindowStart, "Z") || end.Sub(start) != time.Hour-reconcileGrace ||
		string(raw["error"]) != "null" || string(raw["id"])[0] != '"' || rep.Status != "succeeded" {
		t.Fatalf("report %s", r.body)
	}
	if rep.counts() != (counts{checked: 3, matched: 1, flagged: 2}) || len(rep.Diffs) != 2 {
		t.Fatalf("report %+v", rep)
	}
	var got []string
	for _, d := range rep.Diffs {
		got = append(got, d.String())
	}
	sort.Strings(got)
	if want := []string{"paid_without_payment null o-orphan flagged", "refunded_but_paid " + refunded.ID + " o-refunded flagged"}; !slices.Equal(got, want) {
		t.Fatalf("diffs %q, want %q", got, want)
	}
	if !strings.Contains(string(r.body), `"payment_id":null,"order_id":"o-orphan"`) {
		t.Fatalf("the orphan's payment_id is not null: %s", r.body)
	}
	if o, _ := fake.Order("o-orphan"); o != orphan {
		t.Fatalf("order %+v changed", o)
	}
	if n := e.count("payments", "order_id = ?", "o-orphan"); n != 0 {
		t.Fatalf("%d payments made for the flagged order", n)
	}
	if got := e.row(refunded.ID); got.Status != "REFUNDED" {
		t.Fatalf("refunded payment %+v", got)
	}
}

// Both endpoints are internal: without the bearer token they answer 401 and
// nothing runs. Before the first run, latest is 404. The POST body is empty
// or {}; anything else is 400.
func TestReconcile_EndpointsNeedTheTokenAndLatestIs404BeforeTheFirstRun(t *testing.T) {
	t.Parallel()
	e, fake := reconEnv(t, options{})
	for _, h := range [][]string{nil, {"Authorization", "Bearer wrong"}, {"Authorization", internalToken}} {
		for _, req := range []struct{ method, path string }{
			{http.MethodPost, "/v1/reconciliations"}, {http.MethodGet, "/v1/reconciliations/latest"},
		} {
			r := e.do(req.method, req.path, "", h...)
			if r.status != http.StatusUnauthorized || problemCode(r.body) != "unauthenticated" {
				t.Fatalf("%s %s with %v: %v", req.method, req.path, h, r)
			}
		}
	}
	if n := e.count("reconciliation_runs", ""); n != 0 || fake.BatchCalls()+fake.ListCalls() != 0 {
		t.Fatalf("an unauthenticated call ran reconciliation (%d runs, %d order calls)", n, fake.BatchCalls()+fake.ListCalls())
	}
	r := e.do(http.MethodGet, "/v1/reconciliations/latest", "", bearer...)
	if r.status != http.StatusNotFound || !strings.Contains(string(r.body), `"code":"not_found"`) {
		t.Fatalf("latest before the first run: %v", r)
	}
	if r := e.do(http.MethodPost, "/v1/reconciliations", `{"window":"1h"}`, bearer...); r.status != http.StatusBadRequest {
		t.Fatalf("POST with a field: %v", r)
	}
	for _, body := range []string{"", "{}"} {
		if r := e.do(http.MethodPost, "/v1/reconciliations", body, bearer...); r.status != http.StatusOK {
			t.Fatalf("POST %q: %v", body, r)
		}
	}
	if l := e.latest(); l.Status != "succeeded" || l.Diffs == nil {
		t.Fatalf("latest %+v", l)
	}
}

// FuzzReconcileBody: POST /v1/reconciliations takes an empty body or {}.
// Whatever else arrives is a 4xx that runs nothing; nothing is a 5xx.
//
//	go test -run '^$' -fuzz FuzzReconcileBody -fuzztime 30s ./internal/payment/httpapi/
func FuzzReconcileBody(f *testing.F) {
	fake := testkit.NewFakeOrders(f, internalToken)
	e := newEnv(f, options{ordersURL: fake.URL, logger: func(testing.TB) *slog.Logger { return slog.New(slog.DiscardHandler) }})
	for _, seed := range []string{"", "{}", " {} ", "null", `{"window":"1h"}`, "[]", "{", `{"a":1}{}`, strings.Repeat("{", 5000)} {
		f.Add(seed)
	}
	count := func(t *testing.T) int64 { // e.count would call F.Helper
		var n int64
		if err := e.db.Table("reconciliation_runs").Count(&n).Error; err != nil {
			t.Fatal(err)
		}
		return n
	}
	f.Fuzz(func(t *testing.T, body string) {
		before := count(t)
		rec := e.serve(http.MethodPost, "/v1/reconciliations", body, bearer...)
		runs := count(t) - before
		switch {
		case rec.Code == http.StatusOK && runs == 1:
		case rec.Code >= 400 && rec.Code < 500 && rec.Code != http.StatusConflict && runs == 0:
		default:
			t.Fatalf("body %q: %d %s, %d runs", body, rec.Code, rec.Body, runs)
		}
	})
}
