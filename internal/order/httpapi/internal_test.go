package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

type internalOrder struct {
	ID          string  `json:"id"`
	Status      string  `json:"status"`
	PaymentID   *string `json:"payment_id"`
	AmountCents int64   `json:"amount_cents"`
	Currency    string  `json:"currency"`
	UpdatedAt   string  `json:"updated_at"`
}

func (e *env) internal(method, path, body string) resp {
	return e.do(method, path, "", body, "Authorization", "Bearer "+internalToken)
}

func TestInternal_WithoutTheBearerTokenIs401(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	for _, h := range [][]string{nil, {"Authorization", "Bearer wrong"}, {"X-User-ID", "alice"}} {
		mustProblem(t, e.do(http.MethodPost, "/internal/v1/orders/batch-get", "", `{"ids":["1"]}`, h...), 401, "unauthenticated")
		mustProblem(t, e.do(http.MethodGet, "/internal/v1/orders?status=PAID", "", "", h...), 401, "unauthenticated")
	}
}

func TestInternal_BatchGetReturnsTheKnownOrders(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	a := e.create("alice", body1)
	b := e.create("bob", body2)
	r := e.internal(http.MethodPost, "/internal/v1/orders/batch-get",
		fmt.Sprintf(`{"ids":[%q,"999999","x","",%q,%q]}`, b.ID, a.ID, b.ID))
	if r.status != http.StatusOK {
		t.Fatalf("batch-get: %v", r)
	}
	var out struct {
		Orders []internalOrder `json:"orders"`
	}
	mustJSON(t, r.body, &out)
	if len(out.Orders) != 2 || out.Orders[0].ID != a.ID || out.Orders[1].ID != b.ID {
		t.Fatalf("got %+v, want orders %s and %s once each", out.Orders, a.ID, b.ID)
	}
	if o := out.Orders[0]; o.Status != "PENDING_PAYMENT" || o.AmountCents != 700 || o.Currency != "CNY" || o.PaymentID != nil || o.UpdatedAt != a.UpdatedAt {
		t.Fatalf("shape %+v", o)
	}
	var raw struct{ Orders []map[string]json.RawMessage }
	_ = json.Unmarshal(r.body, &raw)
	if len(raw.Orders[0]) != 6 {
		t.Fatalf("internal shape has keys %v, want id,status,payment_id,amount_cents,currency,updated_at", raw.Orders[0])
	}

	ids500 := `"` + strings.Repeat(`1","`, 499) + `1"`
	if r := e.internal(http.MethodPost, "/internal/v1/orders/batch-get", `{"ids":[`+ids500+`]}`); r.status != http.StatusOK {
		t.Fatalf("500 ids: %v", r)
	}
	mustProblem(t, e.internal(http.MethodPost, "/internal/v1/orders/batch-get", `{"ids":[`+ids500+`,"2"]}`), 400, "invalid_request")
	mustProblem(t, e.internal(http.MethodPost, "/internal/v1/orders/batch-get", `{"ids":[1]}`), 400, "invalid_json")
	if r := e.internal(http.MethodPost, "/internal/v1/orders/batch-get", `{"ids":[]}`); r.status != 200 || string(r.body) != `{"orders":[]}` {
		t.Fatalf("no ids: %v", r)
	}
}

func TestInternal_ListUpdatedPagesByUpdateTimeWithinTheWindow(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	start := time.Now().UTC().Add(-time.Second)
	var cancelled []string
	for i := range 12 {
		o := e.create(fmt.Sprintf("u%d", i%3), body1)
		if i%2 == 0 {
			r := e.do(http.MethodPost, "/v1/orders/"+o.ID+"/cancel", o.UserID, "")
			cancelled = append(cancelled, decodeOrder(t, r).ID)
		}
	}
	walk := func(query string) []internalOrder {
		var all []internalOrder
		cursor := ""
		for range 100 {
			q := query
			if cursor != "" {
				q += "&cursor=" + url.QueryEscape(cursor)
			}
			r := e.internal(http.MethodGet, "/internal/v1/orders?"+q, "")
			if r.status != http.StatusOK {
				t.Fatalf("%s: %v", q, r)
			}
			var p struct {
				Orders     []internalOrder `json:"orders"`
				NextCursor *string         `json:"next_cursor"`
			}
			mustJSON(t, r.body, &p)
			all = append(all, p.Orders...)
			if p.NextCursor == nil {
				return all
			}
			cursor = *p.NextCursor
		}
		t.Fatal("listing never ended")
		return nil
	}
	window := "updated_from=" + url.QueryEscape(start.Format(time.RFC3339Nano)) +
		"&updated_to=" + url.QueryEscape(time.Now().UTC().Add(time.Minute).Format(time.RFC3339))
	got := walk("status=CANCELLED&limit=4&" + window)
	var gotIDs []string
	for i, o := range got {
		gotIDs = append(gotIDs, o.ID)
		if o.Status != "CANCELLED" {
			t.Fatalf("status %s in a CANCELLED listing", o.Status)
		}
		if i > 0 && parseTime(t, o.UpdatedAt).Before(parseTime(t, got[i-1].UpdatedAt)) {
			t.Fatalf("not by updated_at: %+v", got)
		}
	}
	// Cancelled one after another, so update order is cancel order.
	if !slices.Equal(gotIDs, cancelled) {
		t.Fatalf("listed %v, want %v", gotIDs, cancelled)
	}
	if all := walk("limit=5"); len(all) != 12 {
		t.Fatalf("unfiltered listing: %d orders, want 12", len(all))
	}
	// The window is half-open and excludes what lies outside it.
	if none := walk("status=CANCELLED&updated_to=" + url.QueryEscape(start.Format(time.RFC3339Nano))); len(none) != 0 {
		t.Fatalf("orders before the window: %+v", none)
	}
	if paid := walk("status=PAID&" + window); len(paid) != 0 {
		t.Fatalf("PAID orders: %+v", paid)
	}
	for _, q := range []string{"status=DONE", "limit=501", "limit=0", "updated_from=yesterday", "updated_to=2026-13-01T00:00:00Z",
		"updated_from=2026-01-02T00:00:00Z&updated_to=2026-01-01T00:00:00Z", "cursor=bzox", "cursor=dTox", "cursor=dToxOjA"} {
		mustProblem(t, e.internal(http.MethodGet, "/internal/v1/orders?"+q, ""), 400, "invalid_request")
	}
	if r := e.internal(http.MethodGet, "/internal/v1/orders?limit=500", ""); r.status != 200 {
		t.Fatalf("limit 500: %v", r)
	}
}

func parseTime(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
