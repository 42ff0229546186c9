package httpapi_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/onceonly/onceonly/internal/payment"
)

func TestCreate_RepeatedReturnsTheSamePayment(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	first := e.create("o-1", 700, "CNY")
	if first.Attempt != 1 || first.Status != "PENDING" || first.GatewayTxnID != nil || first.OrderID != "o-1" {
		t.Fatalf("created %+v", first)
	}
	for range 3 {
		r := e.post("o-1", 700, "CNY")
		if r.status != http.StatusOK || decodePayment(t, r) != first {
			t.Fatalf("repeat: %v, want 200 with %+v", r, first)
		}
		if loc := r.header.Get("Location"); loc != "/v1/payments/"+first.ID {
			t.Errorf("Location %q", loc)
		}
	}
	if got := e.get(first.ID); got != first {
		t.Fatalf("GET %+v, want %+v", got, first)
	}
	if n := e.count("payments", ""); n != 1 {
		t.Fatalf("%d payment rows, want 1", n)
	}
	if e.metric("onceonly_payment_creates_total", "outcome", "new") != 1 ||
		e.metric("onceonly_payment_creates_total", "outcome", "existing") != 3 {
		t.Error("creates_total{new,existing} not 1 and 3")
	}
}

func TestCreate_DifferentAmountOrCurrencyIsPaymentMismatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	p := e.create("o-1", 700, "CNY")
	mustProblem(t, e.post("o-1", 701, "CNY"), http.StatusConflict, "payment_mismatch")
	mustProblem(t, e.post("o-1", 700, "USD"), http.StatusConflict, "payment_mismatch")
	// Still so once the payment succeeded (it is still the live one).
	mustResult(t, e.callback(cbBody(p, "SUCCEEDED", "txn-1")), "processed")
	mustProblem(t, e.post("o-1", 699, "CNY"), http.StatusConflict, "payment_mismatch")
	if r := e.post("o-1", 700, "CNY"); r.status != http.StatusOK || decodePayment(t, r).Status != "SUCCEEDED" {
		t.Fatalf("same order and amount after success: %v", r)
	}
	if n := e.count("payments", ""); n != 1 {
		t.Fatalf("%d payment rows, want 1", n)
	}
}

func TestCreate_ConcurrentFirstCreatesMakeOneRow(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	const n = 100
	got := make([]resp, n)
	race(n, func(i int) { got[i] = e.post("o-race", 500, "CNY") })
	created, id := 0, ""
	for _, r := range got {
		switch r.status {
		case http.StatusCreated:
			created++
		case http.StatusOK:
		default:
			t.Fatalf("concurrent create answered %v", r)
		}
		p := decodePayment(t, r)
		if id == "" {
			id = p.ID
		}
		if p.ID != id || p.Attempt != 1 {
			t.Fatalf("payment %+v, want id %s attempt 1", p, id)
		}
	}
	if created != 1 {
		t.Fatalf("%d answers were 201, want 1", created)
	}
	if rows := e.count("payments", "order_id = ?", "o-race"); rows != 1 {
		t.Fatalf("%d rows, want 1", rows)
	}
}

// After a FAILED attempt the next create makes attempt 2; 100 concurrent
// creates then still yield exactly one live payment.
func TestCreate_AfterFailedCallbackAttemptTwoAndConcurrentCreatesYieldOneLivePayment(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	first := e.create("o-1", 900, "EUR")
	mustResult(t, e.callback(cbBody(first, "FAILED", "txn-declined")), "processed")

	const n = 100
	got := make([]resp, n)
	race(n, func(i int) { got[i] = e.post("o-1", 900, "EUR") })
	created, id := 0, ""
	for _, r := range got {
		if r.status == http.StatusCreated {
			created++
		} else if r.status != http.StatusOK {
			t.Fatalf("create after FAILED answered %v", r)
		}
		p := decodePayment(t, r)
		if id == "" {
			id = p.ID
		}
		if p.ID != id || p.Attempt != 2 || p.Status != "PENDING" {
			t.Fatalf("payment %+v, want one PENDING attempt 2 (id %s)", p, id)
		}
	}
	if created != 1 {
		t.Fatalf("%d answers were 201, want 1", created)
	}
	if live := e.count("payments", "order_id = ? AND status IN ?", "o-1", []string{"PENDING", "SUCCEEDED"}); live != 1 {
		t.Fatalf("%d live payments, want 1", live)
	}
	if rows := e.count("payments", "order_id = ?", "o-1"); rows != 2 {
		t.Fatalf("%d rows, want 2 (the FAILED attempt and the new one)", rows)
	}
	if e.metric("onceonly_payment_creates_total", "outcome", "next_attempt") != 1 {
		t.Error("creates_total{next_attempt} is not 1")
	}
}

// DESIGN.md: after a REFUNDED payment no new attempt is made.
func TestCreate_AfterRefundIsInvalidTransition(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	p := e.create("o-1", 300, "CNY")
	mustResult(t, e.callback(cbBody(p, "SUCCEEDED", "txn-1")), "processed")
	id, _ := strconv.ParseInt(p.ID, 10, 64)
	if err := e.m.Store.Transition(context.Background(), id, payment.Succeeded, payment.Refunded,
		payment.Change{RefundKey: "refund-" + p.ID}); err != nil {
		t.Fatal(err)
	}
	mustProblem(t, e.post("o-1", 300, "CNY"), http.StatusConflict, "invalid_transition")
	if n := e.count("payments", ""); n != 1 {
		t.Fatalf("%d rows, want 1", n)
	}
}

func TestCreate_InvalidBodiesAreRefusedAndCreateNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	long := strings.Repeat("x", 65)
	for _, tc := range []struct {
		name, body, code string
	}{
		{"empty", ``, "invalid_json"},
		{"null", `null`, "invalid_json"},
		{"syntax", `{"order_id":`, "invalid_json"},
		{"unknown field", `{"order_id":"o","user_id":"u","amount_cents":1,"currency":"CNY","tip":1}`, "invalid_json"},
		{"amount as string", `{"order_id":"o","user_id":"u","amount_cents":"1","currency":"CNY"}`, "invalid_json"},
		{"amount fractional", `{"order_id":"o","user_id":"u","amount_cents":1.5,"currency":"CNY"}`, "invalid_json"},
		{"order id as number", `{"order_id":7,"user_id":"u","amount_cents":1,"currency":"CNY"}`, "invalid_json"},
		{"trailing data", `{"order_id":"o","user_id":"u","amount_cents":1,"currency":"CNY"} {}`, "invalid_json"},
		{"empty object", `{}`, "invalid_request"},
		{"no order id", `{"user_id":"u","amount_cents":1,"currency":"CNY"}`, "invalid_request"},
		{"no user id", `{"order_id":"o","amount_cents":1,"currency":"CNY"}`, "invalid_request"},
		{"order id too long", `{"order_id":"` + long + `","user_id":"u","amount_cents":1,"currency":"CNY"}`, "invalid_request"},
		{"order id with space", `{"order_id":"o 1","user_id":"u","amount_cents":1,"currency":"CNY"}`, "invalid_request"},
		{"amount zero", `{"order_id":"o","user_id":"u","amount_cents":0,"currency":"CNY"}`, "invalid_request"},
		{"amount negative", `{"order_id":"o","user_id":"u","amount_cents":-5,"currency":"CNY"}`, "invalid_request"},
		{"amount above 1e12", `{"order_id":"o","user_id":"u","amount_cents":1000000000001,"currency":"CNY"}`, "invalid_request"},
		{"currency lower case", `{"order_id":"o","user_id":"u","amount_cents":1,"currency":"cny"}`, "invalid_request"},
		{"currency four letters", `{"order_id":"o","user_id":"u","amount_cents":1,"currency":"CNYY"}`, "invalid_request"},
		{"currency missing", `{"order_id":"o","user_id":"u","amount_cents":1}`, "invalid_request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mustProblem(t, e.do(http.MethodPost, "/v1/payments", tc.body, bearer...), http.StatusBadRequest, tc.code)
		})
	}
	if r := e.post("o", 1_000_000_000_000, "CNY"); r.status != http.StatusCreated {
		t.Fatalf("amount 1e12 (the bound itself): %v", r)
	}
	if n := e.count("payments", ""); n != 1 {
		t.Fatalf("%d rows, want only the valid one", n)
	}
}

// A client must never create or read a payment by calling the payment
// service directly: every route but the callback and the sandbox needs the
// internal token, and without it nothing runs.
func TestInternalRoutes_WithoutTheBearerTokenAnswer401AndCreateNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	p := e.create("o-1", 100, "CNY")
	for _, auth := range []struct{ name, header string }{
		{"none", ""},
		{"wrong token", "Bearer not-the-token"},
		{"token without scheme", internalToken},
		{"basic scheme", "Basic " + internalToken},
		{"token prefix", "Bearer " + internalToken[:len(internalToken)-1]},
	} {
		for _, call := range []struct{ method, path, body string }{
			{http.MethodPost, "/v1/payments", createBody("o-2", 100, "CNY")},
			{http.MethodGet, "/v1/payments/" + p.ID, ""},
			{http.MethodGet, "/v1/payments/999", ""},
		} {
			t.Run(auth.name+" "+call.method+" "+call.path, func(t *testing.T) {
				var h []string
				if auth.header != "" {
					h = []string{"Authorization", auth.header}
				}
				r := e.do(call.method, call.path, call.body, h...)
				mustProblem(t, r, http.StatusUnauthorized, "unauthenticated")
				if r.header.Get("WWW-Authenticate") != "Bearer" {
					t.Errorf("WWW-Authenticate %q", r.header.Get("WWW-Authenticate"))
				}
			})
		}
	}
	if n := e.count("payments", ""); n != 1 {
		t.Fatalf("%d rows, want only the one made with the token", n)
	}
	// The callback and the sandbox do not ask for the token: they answer
	// on their own terms (401 for an unsigned callback, 404 for no payment).
	mustProblem(t, e.do(http.MethodPost, "/v1/payments/callback", `{}`), http.StatusUnauthorized, "unauthenticated")
	mustProblem(t, e.do(http.MethodPost, "/v1/sandbox/payments/999/complete", `{"status":"SUCCEEDED"}`), http.StatusNotFound, "not_found")
}

func TestGet_UnknownOrUnparsableIDIsNotFound(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	p := e.create("o-1", 100, "CNY")
	for _, id := range []string{"999999", "0", "-1", "0" + p.ID, "+" + p.ID, "abc", "1e3", "99999999999999999999", "callback"} {
		mustProblem(t, e.do(http.MethodGet, "/v1/payments/"+id, "", bearer...), http.StatusNotFound, "not_found")
	}
}

// The GET shape is exactly the contract's: the ten members, ids as strings,
// gateway_txn_id null until the gateway reported.
func TestGet_ShapeIsTheContract(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	p := e.create("o-1", 4200, "JPY")
	r := e.do(http.MethodGet, "/v1/payments/"+p.ID, "", bearer...)
	want := `{"id":"` + p.ID + `","order_id":"o-1","attempt":1,"status":"PENDING","amount_cents":4200,"currency":"JPY","gateway_txn_id":null,"created_at":"` + p.CreatedAt + `","updated_at":"` + p.UpdatedAt + `"}`
	if string(r.body) != want {
		t.Fatalf("GET body\n got %s\nwant %s", r.body, want)
	}
	mustResult(t, e.callback(cbBody(p, "SUCCEEDED", "txn-42")), "processed")
	got := e.get(p.ID)
	if got.Status != "SUCCEEDED" || got.GatewayTxnID == nil || *got.GatewayTxnID != "txn-42" || got.UpdatedAt == p.UpdatedAt {
		t.Fatalf("after the callback: %+v", got)
	}
}
