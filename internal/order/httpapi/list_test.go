package httpapi_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"testing"
	"time"
)

type listPage struct {
	Orders     []orderJSON `json:"orders"`
	NextCursor *string     `json:"next_cursor"`
}

// pages walks a listing to its end and returns every id in order.
func (e *env) pages(user, query string) []string { return e.pagesFrom(user, query, "") }

// pagesFrom walks a listing from cursor ("" = the first page) to its end.
func (e *env) pagesFrom(user, query, cursor string) []string {
	e.t.Helper()
	var ids []string
	for range 1000 {
		q := query
		if cursor != "" {
			q += "&cursor=" + url.QueryEscape(cursor)
		}
		r := e.do(http.MethodGet, "/v1/orders?"+q, user, "")
		if r.status != http.StatusOK {
			e.t.Fatalf("GET /v1/orders?%s: %v", q, r)
		}
		var p listPage
		mustJSON(e.t, r.body, &p)
		for _, o := range p.Orders {
			if o.UserID != user {
				e.t.Fatalf("%s's listing shows %s's order %s", user, o.UserID, o.ID)
			}
			ids = append(ids, o.ID)
		}
		if p.NextCursor == nil {
			return ids
		}
		cursor = *p.NextCursor
	}
	e.t.Fatal("listing never ended")
	return nil
}

func newestFirst(t *testing.T, ids []string) {
	t.Helper()
	for i := 1; i < len(ids); i++ {
		a, _ := strconv.ParseInt(ids[i-1], 10, 64)
		b, _ := strconv.ParseInt(ids[i], 10, 64)
		if a <= b {
			t.Fatalf("not newest first (or repeated): %v", ids)
		}
	}
}

func TestList_KeysetPagesReturnEveryOrderOnceNewestFirst(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	var alice []string
	for i := range 23 {
		alice = append(alice, e.create("alice", body1).ID)
		if i%4 == 0 {
			e.create("bob", body1) // interleaved: must never show up
		}
	}
	slices.Reverse(alice)

	got := e.pages("alice", "limit=5")
	if !slices.Equal(got, alice) {
		t.Fatalf("pages gave %v, want %v", got, alice)
	}
	// The default page size is 20.
	r := e.do(http.MethodGet, "/v1/orders", "alice", "")
	var p listPage
	mustJSON(t, r.body, &p)
	if len(p.Orders) != 20 || p.NextCursor == nil {
		t.Fatalf("default page: %d orders, cursor %v", len(p.Orders), p.NextCursor)
	}

	// An order created between two pages: keyset pages neither repeat nor skip.
	first := e.do(http.MethodGet, "/v1/orders?limit=10", "alice", "")
	mustJSON(t, first.body, &p)
	newID := e.create("alice", body1).ID
	rest := e.pagesFrom("alice", "limit=10", *p.NextCursor)
	all := append(ids(p.Orders), rest...)
	if !slices.Equal(all, alice) || slices.Contains(all, newID) {
		t.Fatalf("pages around a concurrent insert: %v, want %v", all, alice)
	}

	// The status filter pages too.
	var cancelled []string
	for _, id := range alice[:7] {
		if r := e.do(http.MethodPost, "/v1/orders/"+id+"/cancel", "alice", ""); r.status != 200 {
			t.Fatalf("cancel: %v", r)
		}
		cancelled = append(cancelled, id)
	}
	if got := e.pages("alice", "status=CANCELLED&limit=3"); !slices.Equal(got, cancelled) {
		t.Fatalf("CANCELLED pages %v, want %v", got, cancelled)
	}
	pending := e.pages("alice", "status=PENDING_PAYMENT&limit=100")
	newestFirst(t, pending)
	if len(pending) != 23+1-7 {
		t.Fatalf("%d pending orders listed, want %d", len(pending), 23+1-7)
	}
	if got := e.pages("carol", "limit=5"); len(got) != 0 {
		t.Fatalf("a user without orders sees %v", got)
	}
}

func ids(os []orderJSON) []string {
	out := make([]string, len(os))
	for i, o := range os {
		out[i] = o.ID
	}
	return out
}

func TestList_BadParametersAre400(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	for _, q := range []string{"status=NEW", "status=paid", "limit=0", "limit=101", "limit=-1", "limit=abc", "limit=1.5",
		"cursor=!!!", "cursor=bzo", "cursor=dTox", "cursor=bzow", "cursor=bzotMQ", "cursor=bzowMQ"} {
		mustProblem(t, e.do(http.MethodGet, "/v1/orders?"+q, "alice", ""), http.StatusBadRequest, "invalid_request")
	}
	for _, q := range []string{"limit=1", "limit=100", "status=", "status=PAID"} {
		if r := e.do(http.MethodGet, "/v1/orders?"+q, "alice", ""); r.status != http.StatusOK || !bytes.Equal(r.body, []byte(`{"orders":[],"next_cursor":null}`)) {
			t.Errorf("%s: %v", q, r)
		}
	}
}

// The order's JSON is exactly the contract's: these keys, ids as strings,
// payment_id null until set, times RFC 3339 in UTC.
func TestGet_OrderJSONIsTheContract(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	o := e.create("alice", body1)
	r := e.do(http.MethodGet, "/v1/orders/"+o.ID, "alice", "")
	if r.status != http.StatusOK || r.header.Get("Content-Type") != "application/json; charset=utf-8" || r.header.Get("X-Request-ID") == "" {
		t.Fatalf("GET: %v %v", r, r.header)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(r.body, &raw); err != nil {
		t.Fatal(err)
	}
	want := []string{"amount_cents", "created_at", "currency", "id", "items", "payment_id", "status", "updated_at", "user_id", "version"}
	var keys []string
	for k := range raw {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if !slices.Equal(keys, want) {
		t.Fatalf("keys %v, want %v", keys, want)
	}
	if raw["id"][0] != '"' || string(raw["payment_id"]) != "null" {
		t.Errorf("id %s, payment_id %s", raw["id"], raw["payment_id"])
	}
	for _, ts := range []string{o.CreatedAt, o.UpdatedAt} {
		if p, err := time.Parse(time.RFC3339Nano, ts); err != nil || p.Location() != time.UTC || time.Since(p) > time.Minute {
			t.Errorf("time %q: %v", ts, err)
		}
	}
	if string(raw["items"]) != `[{"sku":"apple","quantity":2,"price_cents":350}]` {
		t.Errorf("items %s", raw["items"])
	}
}

func TestGet_OnlyTheOwnerSeesAnOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	o := e.create("alice", body1)
	if r := e.do(http.MethodGet, "/v1/orders/"+o.ID, "alice", ""); r.status != 200 || decodeOrder(t, r).ID != o.ID {
		t.Fatalf("owner: %v", r)
	}
	for _, tc := range []struct{ user, id string }{
		{"bob", o.ID}, {"Alice", o.ID}, {"alice", "x"}, {"alice", "-1"}, {"alice", "0"}, {"alice", "99999999999999999999"},
		{"alice", "1e3"}, {"alice", " " + o.ID},
	} {
		mustProblem(t, e.do(http.MethodGet, "/v1/orders/"+url.PathEscape(tc.id), tc.user, ""), http.StatusNotFound, "not_found")
	}
}

func TestOrders_NoUserIs401OnEveryRoute(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	o := e.create("alice", body1)
	for _, rt := range []struct{ method, path string }{
		{"POST", "/v1/orders/tokens"}, {"POST", "/v1/orders"}, {"GET", "/v1/orders"},
		{"GET", "/v1/orders/" + o.ID}, {"POST", "/v1/orders/" + o.ID + "/cancel"}, {"POST", "/v1/orders/" + o.ID + "/pay"},
	} {
		mustProblem(t, e.do(rt.method, rt.path, "", ""), http.StatusUnauthorized, "unauthenticated")
		mustProblem(t, e.do(rt.method, rt.path, "bad user id", ""), http.StatusUnauthorized, "unauthenticated")
	}
	if g := decodeOrder(t, e.do(http.MethodGet, "/v1/orders/"+o.ID, "alice", "")); g.Status != "PENDING_PAYMENT" {
		t.Fatalf("an unauthenticated cancel changed the order: %+v", g)
	}
}
