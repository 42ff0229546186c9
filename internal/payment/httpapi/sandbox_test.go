package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"

	"github.com/onceonly/onceonly/internal/payment"
	"github.com/onceonly/onceonly/internal/payment/gateway"
)

type completion struct {
	PaymentID    string         `json:"payment_id"`
	Status       string         `json:"status"`
	GatewayTxnID string         `json:"gateway_txn_id"`
	Copies       int            `json:"copies"`
	Deliver      bool           `json:"deliver"`
	Responses    map[string]int `json:"responses"`
	Results      map[string]int `json:"results"`
}

func (e *env) complete(id, body string) completion {
	e.t.Helper()
	r := e.do(http.MethodPost, "/v1/sandbox/payments/"+id+"/complete", body)
	if r.status != http.StatusOK {
		e.t.Fatalf("sandbox complete: %v", r)
	}
	var c completion
	mustJSON(e.t, r.body, &c)
	return c
}

// The sandbox plays a gateway that retries: copies signed callbacks at once,
// over loopback HTTP to the service's own callback URL. The payment
// succeeds once; the copies are absorbed as duplicates.
func TestSandbox_CopiesAreAbsorbedAndThePaymentSucceedsOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	p := e.create("o-1", 4321, "CNY")
	c := e.complete(p.ID, `{"status":"SUCCEEDED","copies":25}`)
	if c.PaymentID != p.ID || c.Status != "SUCCEEDED" || c.Copies != 25 || !c.Deliver || len(c.GatewayTxnID) < 8 ||
		fmt.Sprint(c.Responses) != "map[200:25]" || fmt.Sprint(c.Results) != "map[duplicate:24 processed:1]" {
		t.Fatalf("completion %+v", c)
	}
	got := e.get(p.ID)
	if got.Status != "SUCCEEDED" || got.GatewayTxnID == nil || *got.GatewayTxnID != c.GatewayTxnID {
		t.Fatalf("payment %+v, want SUCCEEDED with %s", got, c.GatewayTxnID)
	}
	if r := e.row(p.ID); r.Version != 2 {
		t.Fatalf("version %d, want 2 (one transition)", r.Version)
	}
	if n := e.count("outbox_events", ""); n != 1 {
		t.Fatalf("%d outbox rows, want 1", n)
	}
	// Completing it again with the same status re-sends the same outcome.
	again := e.complete(p.ID, `{"status":"SUCCEEDED"}`)
	if again.GatewayTxnID != c.GatewayTxnID || fmt.Sprint(again.Results) != "map[duplicate:1]" || again.Copies != 1 {
		t.Fatalf("second completion %+v", again)
	}
	// A contradicting outcome is answered "conflict" and changes nothing.
	flip := e.complete(p.ID, `{"status":"FAILED","copies":2}`)
	if fmt.Sprint(flip.Results) != "map[conflict:2]" || flip.GatewayTxnID == c.GatewayTxnID {
		t.Fatalf("contradicting completion %+v", flip)
	}
	if got := e.get(p.ID); got.Status != "SUCCEEDED" {
		t.Fatalf("payment %+v after a contradicting callback", got)
	}
}

// "deliver": false records the outcome at the gateway and loses the
// callbacks: the payment stays PENDING, and the gateway's Query has the
// answer that reconciliation applies through the callback's own path.
func TestSandbox_DeliverFalseRecordsAtTheGatewayOnlyAndQueryRepairs(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	p := e.create("o-1", 990, "USD")
	c := e.complete(p.ID, `{"status":"FAILED","deliver":false,"copies":3}`)
	if c.Deliver || c.Copies != 3 || len(c.Responses) != 0 || len(c.Results) != 0 {
		t.Fatalf("completion %+v", c)
	}
	if got := e.get(p.ID); got.Status != "PENDING" || got.GatewayTxnID != nil {
		t.Fatalf("payment %+v, want untouched PENDING", got)
	}
	if n := e.count("outbox_events", ""); n != 0 {
		t.Fatalf("%d outbox rows, want 0", n)
	}
	ctx := context.Background()
	pay, err := e.m.Service.Get(ctx, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	out, err := e.m.Gateway.Query(ctx, pay)
	if err != nil || out.Status != payment.Failed || out.GatewayTxnID != c.GatewayTxnID {
		t.Fatalf("Query: %+v, %v; want FAILED %s", out, err, c.GatewayTxnID)
	}
	// A gateway restart (a new simulator on the same records) answers alike.
	sim, err := gateway.NewSimulator(gateway.Config{DB: e.db, Payments: e.m.Service, Secret: "x", CallbackURL: e.url})
	if err != nil {
		t.Fatal(err)
	}
	if again, err := sim.Query(ctx, pay); err != nil || again != out {
		t.Fatalf("Query after a restart: %+v, %v", again, err)
	}
	// The repair: the gateway's answer through ApplyCallback.
	res, err := e.m.Service.ApplyCallback(ctx, payment.OutcomeCallback(pay, out, "reconcile-1"))
	if err != nil || res != payment.ResultProcessed {
		t.Fatalf("apply the queried outcome: %v, %v", res, err)
	}
	if got := e.get(p.ID); got.Status != "FAILED" || *got.GatewayTxnID != c.GatewayTxnID {
		t.Fatalf("payment %+v after the repair", got)
	}
	// A payment the gateway has no outcome for is PENDING there: nothing to do.
	q := e.create("o-2", 10, "USD")
	qp, _ := e.m.Service.Get(ctx, q.ID)
	if out, err := e.m.Gateway.Query(ctx, qp); err != nil || out.Status != payment.Pending || out.GatewayTxnID != "" {
		t.Fatalf("Query of an unsettled payment: %+v, %v", out, err)
	}
}

func TestSandbox_BadValuesAre400AndUnknownPaymentIs404(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	p := e.create("o-1", 100, "CNY")
	path := "/v1/sandbox/payments/" + p.ID + "/complete"
	for _, tc := range []struct{ name, body, code string }{
		{"status missing", `{}`, "invalid_request"},
		{"status PENDING", `{"status":"PENDING"}`, "invalid_request"},
		{"copies zero", `{"status":"SUCCEEDED","copies":0}`, "invalid_request"},
		{"copies 1001", `{"status":"SUCCEEDED","copies":1001}`, "invalid_request"},
		{"copies negative", `{"status":"SUCCEEDED","copies":-1}`, "invalid_request"},
		{"copies fractional", `{"status":"SUCCEEDED","copies":1.5}`, "invalid_json"},
		{"deliver as string", `{"status":"SUCCEEDED","deliver":"yes"}`, "invalid_json"},
		{"unknown field", `{"status":"SUCCEEDED","delay":5}`, "invalid_json"},
		{"empty body", ``, "invalid_json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mustProblem(t, e.do(http.MethodPost, path, tc.body), http.StatusBadRequest, tc.code)
		})
	}
	for _, id := range []string{"999999", "abc", "0"} {
		mustProblem(t, e.do(http.MethodPost, "/v1/sandbox/payments/"+id+"/complete", `{"status":"SUCCEEDED"}`), http.StatusNotFound, "not_found")
	}
	if n := e.count("sim_gateway_records", ""); n != 0 {
		t.Fatalf("%d gateway records after refused completions, want 0", n)
	}
	if got := e.get(p.ID); got.Status != "PENDING" {
		t.Fatalf("payment %+v", got)
	}
}

// Refund is idempotent on its key: twice, or twenty times at once, with one
// key records one refund; a key is bound to its payment.
func TestSimulator_RefundTwiceWithOneKeyRecordsOneRefund(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	ctx := context.Background()
	a, _ := e.m.Service.Get(ctx, e.create("o-a", 100, "CNY").ID)
	b, _ := e.m.Service.Get(ctx, e.create("o-b", 200, "CNY").ID)
	for range 2 {
		if err := e.m.Gateway.Refund(ctx, a, "refund-a"); err != nil {
			t.Fatalf("refund: %v", err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for range 20 {
		wg.Go(func() { errs <- e.m.Gateway.Refund(ctx, b, "refund-b") })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent refund: %v", err)
		}
	}
	for _, c := range []struct {
		p    payment.Payment
		want int64
	}{{a, 1}, {b, 1}} {
		if n, err := e.m.Simulator.Refunds(ctx, c.p.ID); err != nil || n != c.want {
			t.Fatalf("payment %d: %d refunds (%v), want %d", c.p.ID, n, err, c.want)
		}
	}
	if err := e.m.Gateway.Refund(ctx, b, "refund-a"); err == nil {
		t.Fatal("a refund key of payment a refunded payment b")
	}
	if n, _ := e.m.Simulator.Refunds(ctx, b.ID); n != 1 {
		t.Fatalf("%d refunds of b after a reused key, want 1", n)
	}
	if err := e.m.Gateway.Refund(ctx, a, "refund-a-2"); err != nil {
		t.Fatal(err)
	}
	if n, _ := e.m.Simulator.Refunds(ctx, a.ID); n != 2 {
		t.Fatalf("%d refunds of a with a second key, want 2", n)
	}
}

// The walkthrough reads the completion summary: its members are the contract.
func TestSandbox_SummaryShape(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	p := e.create("o-1", 100, "CNY")
	r := e.do(http.MethodPost, "/v1/sandbox/payments/"+p.ID+"/complete", `{"status":"SUCCEEDED","copies":2}`)
	var m map[string]json.RawMessage
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"payment_id", "status", "gateway_txn_id", "copies", "deliver", "responses", "results"} {
		if _, ok := m[k]; !ok {
			t.Errorf("summary %s lacks %q", r.body, k)
		}
	}
	if len(m) != 7 || string(m["payment_id"]) != strconv.Quote(p.ID) {
		t.Errorf("summary %s", r.body)
	}
}
