package httpapi_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"testing"

	"github.com/onceonly/onceonly/internal/order/app"
	"github.com/onceonly/onceonly/internal/platform/testkit"
)

// FuzzPay: no id or body makes /pay answer 5xx or anything outside its
// contract, and whatever is asked, the order has at most one live payment.
//
//	go test -run '^$' -fuzz FuzzPay -fuzztime 20s ./internal/order/httpapi/
func FuzzPay(f *testing.F) {
	fake := testkit.NewFakePayments(f, internalToken)
	e := newEnv(f, options{
		cfg:    func(c *app.Config) { c.PaymentServiceURL = fake.URL },
		logger: func(testing.TB) *slog.Logger { return slog.New(slog.DiscardHandler) },
	})
	o := e.create("alice", body1)
	for _, seed := range []struct{ id, body string }{
		{o.ID, ""}, {o.ID, "{}"}, {o.ID, " null "}, {o.ID, `{"x":1}`}, {o.ID, "[]"}, {o.ID, "{}{}"},
		{"0" + o.ID, ""}, {"-1", ""}, {"99999999999999999999", ""}, {"abc", "{}"}, {o.ID + "%00", ""},
	} {
		f.Add(seed.id, []byte(seed.body))
	}
	f.Fuzz(func(t *testing.T, id string, body []byte) {
		rec := e.serve(http.MethodPost, "/v1/orders/"+url.PathEscape(id)+"/pay", "alice", string(body))
		got, _ := io.ReadAll(rec.Body)
		switch rec.Code {
		case http.StatusOK, http.StatusCreated:
			var p payJSON
			if err := json.Unmarshal(got, &p); err != nil || p.PaymentID == "" || p.OrderID != o.ID {
				t.Fatalf("%d with %s (%v)", rec.Code, got, err)
			}
		case http.StatusBadRequest, http.StatusNotFound, http.StatusRequestEntityTooLarge:
			var p problem
			if err := json.Unmarshal(got, &p); err != nil || p.Code == "" {
				t.Fatalf("refusal without a problem: %s", got)
			}
		default:
			t.Fatalf("id %q body %q: answered %d %s", id, body, rec.Code, got)
		}
		if n := len(fake.Attempts(o.ID)); n > 1 {
			t.Fatalf("%d payment attempts for one order", n)
		}
	})
}
