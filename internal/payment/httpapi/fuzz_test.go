package httpapi_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/onceonly/onceonly/internal/payment"
)

// serve runs one request through the engine in process (no socket), for the
// fuzzers' thousands of inputs.
func (e *env) serve(method, path, body string, headers ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	rec := httptest.NewRecorder()
	e.handler.ServeHTTP(rec, req)
	return rec
}

func quietEnv(f *testing.F) *env {
	return newEnv(f, options{logger: func(testing.TB) *slog.Logger { return slog.New(slog.DiscardHandler) }})
}

// FuzzCallback: no callback — whatever its body, timestamp and signature —
// makes the service answer 5xx or panic, and every answer is one the
// contract names. With sign set the body is signed correctly, so the fuzzer
// reaches the parser and the state machine behind the signature.
//
//	go test -run '^$' -fuzz FuzzCallback -fuzztime 30s ./internal/payment/httpapi/
func FuzzCallback(f *testing.F) {
	e := quietEnv(f)
	p := e.create("o-fuzz", 500, "CNY")
	q := e.create("o-fuzz-2", 700, "USD")
	now := strconv.FormatInt(time.Now().Unix(), 10)
	for _, seed := range []struct {
		body, ts, sig string
		sign          bool
	}{
		{cbBody(p, "SUCCEEDED", "t1"), "", "", true},
		{cbBody(q, "FAILED", "t2"), "", "", true},
		{cbBody(q, "SUCCEEDED", "t2"), "", "", true},
		{cbBody(p, "SUCCEEDED", "t1"), now, "00", false},
		{cbBody(p, "SUCCEEDED", "t1"), now, payment.Sign(currentKey, now, []byte(cbBody(p, "SUCCEEDED", "t1"))), false},
		{`{"payment_id":"` + p.ID + `","gateway_txn_id":"t","status":"SUCCEEDED","amount_cents":501,"currency":"CNY"}`, "", "", true},
		{`{"payment_id":"1","amount_cents":"x"}`, "", "", true},
		{`{"payment_id":"99999999999999999999","gateway_txn_id":"t","status":"FAILED","amount_cents":1,"currency":"CNY"}`, "", "", true},
		{`{"payment_id":"` + p.ID + `","gateway_txn_id":"` + strings.Repeat("\u00e9", 100) + `","status":"FAILED","amount_cents":500,"currency":"CNY"}`, "", "", true},
		{`{"payment_id":"` + p.ID + `","gateway_txn_id":"a\u0000b","status":"FAILED","amount_cents":500,"currency":"CNY"}`, "", "", true},
		{`{"payment_id":"` + p.ID + `","amount_cents":9223372036854775807,"amount_cents":-1}`, "", "", true},
		{``, "", "", true}, {`null`, "", "", true}, {`[`, "", "", true}, {strings.Repeat("[", 10000), "", "", true},
		{`{}`, "99999999999999999999", "zz", false}, {`{}`, "-1", "", false}, {`{}`, " 1", "", false},
	} {
		f.Add([]byte(seed.body), seed.ts, seed.sig, seed.sign)
	}
	f.Fuzz(func(t *testing.T, body []byte, ts, sig string, sign bool) {
		if sign {
			ts = strconv.FormatInt(time.Now().Unix(), 10)
			sig = payment.Sign(currentKey, ts, body)
		}
		rec := e.serve(http.MethodPost, "/v1/payments/callback", string(body),
			payment.TimestampHeader, ts, payment.SignatureHeader, sig)
		got, _ := io.ReadAll(rec.Body)
		if rec.Code >= 500 || !json.Valid(got) {
			t.Fatalf("callback %q (ts %q sig %q): answered %d %s", body, ts, sig, rec.Code, got)
		}
		switch rec.Code {
		case http.StatusOK:
			var r struct{ Result string }
			if json.Unmarshal(got, &r) != nil || (r.Result != "processed" && r.Result != "duplicate" && r.Result != "conflict") {
				t.Fatalf("200 with %s", got)
			}
		case http.StatusUnauthorized, http.StatusBadRequest, http.StatusNotFound,
			http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity:
			var pr problem
			if err := json.Unmarshal(got, &pr); err != nil || pr.Code == "" || pr.Detail == "" {
				t.Fatalf("refusal without a problem: %s", got)
			}
			if !sign && rec.Code != http.StatusUnauthorized && rec.Code != http.StatusRequestEntityTooLarge &&
				sig != payment.Sign(currentKey, ts, body) && sig != payment.Sign(previousKey, ts, body) {
				t.Fatalf("unsigned callback got past the signature: %d %s", rec.Code, got)
			}
		default:
			t.Fatalf("callback %q: answered %d %s", body, rec.Code, got)
		}
	})
}

// FuzzCreatePayment: no body makes POST /v1/payments answer 5xx; an
// accepted one is readable and is returned again by a repeat.
//
//	go test -run '^$' -fuzz FuzzCreatePayment -fuzztime 30s ./internal/payment/httpapi/
func FuzzCreatePayment(f *testing.F) {
	e := quietEnv(f)
	for _, seed := range []string{
		createBody("o-1", 100, "CNY"), createBody("o-1", 101, "CNY"), createBody("o-1", 100, "USD"),
		``, `null`, `{}`, `[]`, `"x"`, `{"order_id":"o"}`,
		`{"order_id":"o-2","user_id":"u","amount_cents":1000000000000,"currency":"EUR"}`,
		`{"order_id":"o-2","user_id":"u","amount_cents":1e3,"currency":"EUR"}`,
		`{"order_id":"o-3","user_id":"u","amount_cents":-9223372036854775808,"currency":"EUR"}`,
		`{"order_id":"o-3","user_id":"u","amount_cents":9223372036854775808,"currency":"EUR"}`,
		`{"ORDER_ID":"o-4","USER_ID":"u","AMOUNT_CENTS":5,"CURRENCY":"EUR"}`,
		`{"order_id":"o\u0000","user_id":"u","amount_cents":5,"currency":"EUR"}`,
		`{"order_id":"o-5","user_id":"u","amount_cents":5,"currency":"EUR","order_id":"o-6"}`,
		`{"order_id":"` + strings.Repeat("x", 64) + `","user_id":"u","amount_cents":5,"currency":"EUR"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := e.serve(http.MethodPost, "/v1/payments", string(body), bearer...)
		got, _ := io.ReadAll(rec.Body)
		if rec.Code >= 500 || !json.Valid(got) {
			t.Fatalf("body %q: answered %d %s", body, rec.Code, got)
		}
		switch rec.Code {
		case http.StatusCreated, http.StatusOK:
			var p paymentJSON
			if err := json.Unmarshal(got, &p); err != nil || p.ID == "" || p.AmountCents <= 0 || p.Attempt < 1 {
				t.Fatalf("%d with %s (%v)", rec.Code, got, err)
			}
			again := e.serve(http.MethodPost, "/v1/payments", string(body), bearer...)
			var r paymentJSON
			if again.Code != http.StatusOK || json.Unmarshal(again.Body.Bytes(), &r) != nil || r.ID != p.ID {
				t.Fatalf("repeat of %q: %d %s, want 200 with payment %s", body, again.Code, again.Body, p.ID)
			}
			read := e.serve(http.MethodGet, "/v1/payments/"+p.ID, "", bearer...)
			if read.Code != http.StatusOK {
				t.Fatalf("GET %s: %d", p.ID, read.Code)
			}
		case http.StatusBadRequest, http.StatusConflict, http.StatusRequestEntityTooLarge:
			var pr problem
			if err := json.Unmarshal(got, &pr); err != nil || pr.Detail == "" || pr.Code == "" {
				t.Fatalf("refusal without a problem: %s", got)
			}
		default:
			t.Fatalf("body %q: answered %d %s", body, rec.Code, got)
		}
	})
}
