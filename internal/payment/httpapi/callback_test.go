package httpapi_test

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/onceonly/onceonly/internal/payment"
)

// Nothing about a callback is trusted before its signature: every forged,
// unsigned, stale or altered one is 401, and the payment does not move.
func TestCallback_UnauthenticatedCallbacksAre401AndChangeNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	e.setClock(now)
	p := e.create("o-1", 500, "CNY")
	body := cbBody(p, "SUCCEEDED", "txn-1")
	ts := strconv.FormatInt(now.Unix(), 10)
	good := payment.Sign(currentKey, ts, []byte(body))
	for _, tc := range []struct {
		name, body string
		headers    []string
		metric     string
	}{
		{"forged signature", body, signed("attacker-key", now, body), "bad_signature"},
		{"no headers", body, nil, "bad_signature"},
		{"no timestamp", body, []string{payment.SignatureHeader, good}, "bad_signature"},
		{"no signature", body, []string{payment.TimestampHeader, ts}, "bad_signature"},
		{"timestamp 301 s old", body, signed(currentKey, now.Add(-301*time.Second), body), "stale"},
		{"timestamp 301 s ahead", body, signed(currentKey, now.Add(301*time.Second), body), "stale"},
		{"body altered after signing", cbBody(p, "SUCCEEDED", "txn-2"), signed(currentKey, now, body), "bad_signature"},
		{"amount altered after signing", cbBody(paymentJSON{ID: p.ID, AmountCents: 5, Currency: "CNY"}, "SUCCEEDED", "txn-1"), signed(currentKey, now, body), "bad_signature"},
		{"field appended after signing", body[:len(body)-1] + `,"x":1}`, signed(currentKey, now, body), "bad_signature"},
		{"retired key", body, signed(retiredKey, now, body), "bad_signature"},
		{"timestamp changed after signing", body, []string{payment.TimestampHeader, strconv.FormatInt(now.Unix()+1, 10), payment.SignatureHeader, good}, "bad_signature"},
		{"timestamp not decimal", body, []string{payment.TimestampHeader, "1.7e9", payment.SignatureHeader, payment.Sign(currentKey, "1.7e9", []byte(body))}, "bad_signature"},
		{"timestamp negative", body, []string{payment.TimestampHeader, "-" + ts, payment.SignatureHeader, payment.Sign(currentKey, "-"+ts, []byte(body))}, "bad_signature"},
		{"signature not hex", body, []string{payment.TimestampHeader, ts, payment.SignatureHeader, "zz" + good[2:]}, "bad_signature"},
		{"signature truncated", body, []string{payment.TimestampHeader, ts, payment.SignatureHeader, good[:62]}, "bad_signature"},
		{"empty body, no headers", "", nil, "bad_signature"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := e.metric("onceonly_payment_callbacks_total", "result", tc.metric)
			mustProblem(t, e.do(http.MethodPost, "/v1/payments/callback", tc.body, tc.headers...), http.StatusUnauthorized, "unauthenticated")
			if after := e.metric("onceonly_payment_callbacks_total", "result", tc.metric); after != before+1 {
				t.Errorf("callbacks_total{%s} went %v → %v", tc.metric, before, after)
			}
		})
	}
	if r := e.row(p.ID); r.Status != "PENDING" || r.Version != 1 || r.GatewayTxnID != nil {
		t.Fatalf("payment changed: %+v", r)
	}
	if n := e.count("outbox_events", ""); n != 0 {
		t.Fatalf("%d outbox rows, want 0", n)
	}
	if n := e.count("callback_records", ""); n != 0 {
		t.Fatalf("%d callback records for unauthenticated callbacks, want 0", n)
	}
	// The window's edges are inclusive: exactly 300 s off verifies.
	mustResult(t, e.do(http.MethodPost, "/v1/payments/callback", body, signed(currentKey, now.Add(-300*time.Second), body)...), "processed")
	mustResult(t, e.do(http.MethodPost, "/v1/payments/callback", body, signed(currentKey, now.Add(300*time.Second), body)...), "duplicate")
}

// Key rotation: any configured key verifies.
func TestCallback_SecondConfiguredKeyVerifies(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	p := e.create("o-1", 500, "CNY")
	body := cbBody(p, "SUCCEEDED", "txn-1")
	mustResult(t, e.do(http.MethodPost, "/v1/payments/callback", body, signed(previousKey, time.Now(), body)...), "processed")
	mustResult(t, e.do(http.MethodPost, "/v1/payments/callback", body, signed(currentKey, time.Now(), body)...), "duplicate")
}

func TestCallback_UnknownPaymentIsNotFound(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	p := e.create("o-1", 500, "CNY")
	for _, id := range []string{"999999", "abc", "0" + p.ID, "-1"} {
		q := p
		q.ID = id
		mustProblem(t, e.callback(cbBody(q, "SUCCEEDED", "txn-1")), http.StatusNotFound, "not_found")
	}
	if e.metric("onceonly_payment_callbacks_total", "result", "not_found") != 4 {
		t.Error("callbacks_total{not_found} is not 4")
	}
	if r := e.row(p.ID); r.Status != "PENDING" {
		t.Fatalf("payment changed: %+v", r)
	}
}

// An amount off by one cent (or another currency) is refused with 422, the
// payment does not move, and the callback is kept byte for byte.
func TestCallback_AmountOffByOneCentIs422RecordedAndChangesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	p := e.create("o-1", 500, "CNY")
	off := p
	off.AmountCents = 501
	other := p
	other.Currency = "USD"
	bodies := []string{cbBody(off, "SUCCEEDED", "txn-1"), cbBody(other, "SUCCEEDED", "txn-1")}
	for _, b := range bodies {
		mustProblem(t, e.callback(b, "X-Request-ID", "gw-mismatch"), http.StatusUnprocessableEntity, "amount_mismatch")
	}
	if r := e.row(p.ID); r.Status != "PENDING" || r.Version != 1 {
		t.Fatalf("payment changed: %+v", r)
	}
	if n := e.count("outbox_events", ""); n != 0 {
		t.Fatalf("%d outbox rows, want 0", n)
	}
	id, _ := strconv.ParseInt(p.ID, 10, 64)
	recs, err := e.m.Store.Records(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 {
		t.Fatalf("%d records, want 2", len(recs))
	}
	for i, rec := range recs {
		if rec.Kind != payment.RecordMismatch || string(rec.Body) != bodies[i] || rec.RequestID != "gw-mismatch" ||
			rec.Status != payment.Succeeded || rec.ReceivedAt.IsZero() {
			t.Errorf("record %d: %+v (body %s)", i, rec, rec.Body)
		}
	}
	if e.metric("onceonly_payment_callbacks_total", "result", "mismatch") != 2 {
		t.Error("callbacks_total{mismatch} is not 2")
	}
	mustResult(t, e.callback(cbBody(p, "SUCCEEDED", "txn-1")), "processed")
}

// A status that contradicts the payment's outcome is answered 200
// "conflict" (a non-2xx would be retried for ever), changes nothing, and is
// recorded and counted. The same status again is "duplicate", whatever the
// gateway_txn_id; a REFUNDED payment had SUCCEEDED first.
func TestCallback_LateCallbacksAreDuplicateOrConflictAndChangeNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	ok := e.create("o-ok", 500, "CNY")
	mustResult(t, e.callback(cbBody(ok, "SUCCEEDED", "txn-a")), "processed")
	mustResult(t, e.callback(cbBody(ok, "SUCCEEDED", "txn-other")), "duplicate")
	mustResult(t, e.callback(cbBody(ok, "FAILED", "txn-a")), "conflict")

	bad := e.create("o-bad", 700, "CNY")
	mustResult(t, e.callback(cbBody(bad, "FAILED", "txn-f")), "processed")
	mustResult(t, e.callback(cbBody(bad, "FAILED", "txn-f")), "duplicate")
	mustResult(t, e.callback(cbBody(bad, "SUCCEEDED", "txn-f")), "conflict")

	refunded := e.create("o-ref", 900, "CNY")
	mustResult(t, e.callback(cbBody(refunded, "SUCCEEDED", "txn-r")), "processed")
	id, _ := strconv.ParseInt(refunded.ID, 10, 64)
	if err := e.m.Store.Transition(t.Context(), id, payment.Succeeded, payment.Refunded, payment.Change{RefundKey: "rk-" + refunded.ID}); err != nil {
		t.Fatal(err)
	}
	mustResult(t, e.callback(cbBody(refunded, "SUCCEEDED", "txn-r")), "duplicate")
	mustResult(t, e.callback(cbBody(refunded, "FAILED", "txn-r")), "conflict")

	for _, c := range []struct {
		p       paymentJSON
		status  string
		version int64
		txn     string
	}{{ok, "SUCCEEDED", 2, "txn-a"}, {bad, "FAILED", 2, "txn-f"}, {refunded, "REFUNDED", 3, "txn-r"}} {
		if r := e.row(c.p.ID); r.Status != c.status || r.Version != c.version || r.GatewayTxnID == nil || *r.GatewayTxnID != c.txn {
			t.Errorf("payment %s: %+v, want %s version %d txn %s", c.p.OrderID, r, c.status, c.version, c.txn)
		}
	}
	if n := e.count("outbox_events", ""); n != 3 {
		t.Fatalf("%d outbox rows, want one per processed callback (3)", n)
	}
	if n := e.count("callback_records", "kind = ?", payment.RecordConflict); n != 3 {
		t.Fatalf("%d conflict records, want 3", n)
	}
	if e.metric("onceonly_payment_callbacks_total", "result", "conflict") != 3 {
		t.Error("callbacks_total{conflict} is not 3")
	}
}

// A verified callback is parsed leniently: unknown fields are ignored, but
// types are strict and the contract's fields are required.
func TestCallback_VerifiedBodiesAreParsedLenientlyButStrictlyTyped(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	p := e.create("o-1", 500, "CNY")
	for _, tc := range []struct{ name, body, code string }{
		{"syntax", `{"payment_id":`, "invalid_json"},
		{"empty", ``, "invalid_json"},
		{"null", `null`, "invalid_json"},
		{"array", `[]`, "invalid_json"},
		{"amount as string", `{"payment_id":"` + p.ID + `","gateway_txn_id":"t","status":"SUCCEEDED","amount_cents":"500","currency":"CNY"}`, "invalid_json"},
		{"payment id as number", `{"payment_id":` + p.ID + `,"gateway_txn_id":"t","status":"SUCCEEDED","amount_cents":500,"currency":"CNY"}`, "invalid_json"},
		{"status not a string", `{"payment_id":"` + p.ID + `","gateway_txn_id":"t","status":true,"amount_cents":500,"currency":"CNY"}`, "invalid_json"},
		{"missing amount", `{"payment_id":"` + p.ID + `","gateway_txn_id":"t","status":"SUCCEEDED","currency":"CNY"}`, "invalid_request"},
		{"null amount", `{"payment_id":"` + p.ID + `","gateway_txn_id":"t","status":"SUCCEEDED","amount_cents":null,"currency":"CNY"}`, "invalid_request"},
		{"missing txn", `{"payment_id":"` + p.ID + `","status":"SUCCEEDED","amount_cents":500,"currency":"CNY"}`, "invalid_request"},
		{"empty object", `{}`, "invalid_request"},
		{"status PENDING", cbBody(p, "PENDING", "t"), "invalid_request"},
		{"status REFUNDED", cbBody(p, "REFUNDED", "t"), "invalid_request"},
		{"status lower case", cbBody(p, "succeeded", "t"), "invalid_request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mustProblem(t, e.callback(tc.body), http.StatusBadRequest, tc.code)
		})
	}
	if r := e.row(p.ID); r.Status != "PENDING" || r.Version != 1 {
		t.Fatalf("payment changed: %+v", r)
	}
	withExtras := `{"event":"pay.notify","payment_id":"` + p.ID + `","gateway_txn_id":"t-1","status":"SUCCEEDED","amount_cents":500,"currency":"CNY","fee":{"cents":3},"tags":[1,"x"]}`
	mustResult(t, e.callback(withExtras), "processed")
}
