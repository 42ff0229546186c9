package httpapi_test

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onceonly/onceonly/internal/order/app"
)

// serve runs one request through the engine in process (no socket), for
// the fuzzer's thousands of inputs.
func (e *env) serve(method, path, user, body string, headers ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("X-User-ID", user)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	rec := httptest.NewRecorder()
	e.handler.ServeHTTP(rec, req)
	return rec
}

// FuzzSubmitBody: no submit body, however malformed, makes the service
// answer 5xx; an accepted one replays as the same order.
//
//	go test -run '^$' -fuzz FuzzSubmitBody -fuzztime 20s ./internal/order/httpapi/
func FuzzSubmitBody(f *testing.F) {
	for _, seed := range []string{
		body1, body2, ``, `null`, `{}`, `[]`, `"x"`, `{"currency":"CNY"}`, `{"items":null}`,
		`{"currency":"CNY","items":[{"sku":"s","quantity":1000,"price_cents":1000000000}]}`,
		`{"currency":"CNY","items":[{"sku":"s","quantity":-1,"price_cents":1e3}]}`,
		`{"currency":"CNY","items":[{"sku":"s","quantity":1,"price_cents":9223372036854775807}]}`,
		`{"currency":"CNY","items":[{"sku":"s","quantity":1,"price_cents":-9223372036854775808}]}`,
		`{"currency":"CNY","items":[{"sku":"\u00e9\ud83d\ude00","quantity":1,"price_cents":1}]}`,
		`{"currency":"CNY","items":[{"sku":"\ud800","quantity":1,"price_cents":1}]}`,
		`{"currency":"CNY","items":[{"sku":"s","quantity":1,"price_cents":1,"sku":"t"}]}`,
		`{"CURRENCY":"CNY","ITEMS":[{"SKU":"s","QUANTITY":1,"PRICE_CENTS":1}]}`,
		`{"currency":"CNY","items":[{}]}`, `{"currency":"CNY","items":[null]}`, `{"currency":"CNY","items":{}}`,
		`{"currency":"CNY","items":[` + strings.Repeat(`{"sku":"s","quantity":1,"price_cents":1},`, 49) + `{"sku":"s","quantity":1,"price_cents":1}]}`,
		`{"currency":"CN\u0000","items":[]}`, "{\"currency\":\"CNY\"\x00}", `{"currency":1}`, `{"currency":"CNY","items":[` + strings.Repeat("[", 5000),
	} {
		f.Add([]byte(seed))
	}
	// Short-lived tokens keep the key count small: embedded miniredis scans
	// every key on each command, so a million stale tokens would slow the
	// fuzzer to a crawl. 64 users rotate below the 100-unused-tokens cap.
	e := newEnv(f, options{
		cfg:    func(c *app.Config) { c.TokenTTL, c.SubmitLease = 2*time.Second, time.Second },
		logger: func(testing.TB) *slog.Logger { return slog.New(slog.DiscardHandler) },
	})
	var n atomic.Int64
	f.Fuzz(func(t *testing.T, body []byte) {
		user := fmt.Sprintf("fuzz-%d", n.Add(1)%64)
		tr := e.serve(http.MethodPost, "/v1/orders/tokens", user, "")
		if tr.Code != http.StatusCreated {
			t.Fatalf("token: %d %s", tr.Code, tr.Body)
		}
		var tok struct {
			Token string `json:"token"`
		}
		if err := json.Unmarshal(tr.Body.Bytes(), &tok); err != nil {
			t.Fatal(err)
		}
		rec := e.serve(http.MethodPost, "/v1/orders", user, string(body), "Idempotency-Key", tok.Token)
		got, _ := io.ReadAll(rec.Body)
		if rec.Code >= 500 || !json.Valid(got) {
			t.Fatalf("body %q: answered %d %s", body, rec.Code, got)
		}
		switch rec.Code {
		case http.StatusCreated:
			var o orderJSON
			if err := json.Unmarshal(got, &o); err != nil || o.ID == "" || o.AmountCents <= 0 {
				t.Fatalf("201 with %s (%v)", got, err)
			}
			again := e.serve(http.MethodPost, "/v1/orders", user, string(body), "Idempotency-Key", tok.Token)
			var r orderJSON
			if again.Code != http.StatusOK || json.Unmarshal(again.Body.Bytes(), &r) != nil || r.ID != o.ID {
				t.Fatalf("replay of %q: %d %s, want 200 with order %s", body, again.Code, again.Body, o.ID)
			}
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
			var p problem
			if err := json.Unmarshal(got, &p); err != nil || p.Detail == "" || p.Code == "" {
				t.Fatalf("refusal without a problem: %s", got)
			}
		default:
			t.Fatalf("body %q: answered %d %s", body, rec.Code, got)
		}
	})
}
