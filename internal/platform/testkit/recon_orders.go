package testkit

import (
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// FakeOrder is an order as the fake order service reports it.
type FakeOrder struct {
	ID          string
	Status      string // PENDING_PAYMENT, PAID, CANCELLED
	PaymentID   string // "" is null
	AmountCents int64
	Currency    string
	UpdatedAt   time.Time
}

// FakeOrders is a stand-in for the order service's internal API, for the
// payment service's reconciliation tests: POST /internal/v1/orders/batch-get
// and GET /internal/v1/orders?status=&updated_from=&updated_to=&cursor=&limit=,
// behind the bearer token, over an in-memory map the test controls
// (DESIGN.md shapes: ids as strings, RFC 3339 times, unknown ids absent,
// more than 500 ids or a limit above 500 answered 400).
//
// Generate replaces the map with a rule for millions of orders (benchmarks)
// without holding them in memory. Fail makes every call answer a status
// (503: the service is down but reachable); put a Proxy in front and Cut it
// for a closed port.
type FakeOrders struct {
	// URL is the server's base URL.
	URL   string
	token string

	mu     sync.Mutex
	orders map[string]FakeOrder
	genN   int
	gen    func(i int) FakeOrder

	fail      atomic.Int32 // HTTP status every call answers; 0: none
	failAfter atomic.Int64 // calls still answered before fail applies; <0: none
	delay     atomic.Int64 // ns added to every call

	// Calls counts the calls answered per route ("batch-get", "list").
	batchCalls, listCalls atomic.Int64
	maxBatch              atomic.Int64
}

// NewFakeOrders starts the fake on a loopback port, stopped when the test
// ends. token is the INTERNAL_API_TOKEN it accepts.
func NewFakeOrders(t testing.TB, token string) *FakeOrders {
	t.Helper()
	f := &FakeOrders{token: token, orders: map[string]FakeOrder{}}
	f.failAfter.Store(-1)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /internal/v1/orders/batch-get", f.guard(f.batchGet))
	mux.HandleFunc("GET /internal/v1/orders", f.guard(f.list))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	f.URL = srv.URL
	return f
}

// Put adds or replaces orders.
func (f *FakeOrders) Put(orders ...FakeOrder) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, o := range orders {
		o.UpdatedAt = o.UpdatedAt.UTC()
		f.orders[o.ID] = o
	}
}

// SetStatus changes the status of existing orders (updated_at unchanged)
// and reports whether every id existed.
func (f *FakeOrders) SetStatus(status string, ids ...string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	all := true
	for _, id := range ids {
		o, ok := f.orders[id]
		if !ok {
			all = false
			continue
		}
		o.Status = status
		f.orders[id] = o
	}
	return all
}

// Order returns the order with id as the fake holds it.
func (f *FakeOrders) Order(id string) (FakeOrder, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	o, ok := f.orders[id]
	return o, ok
}

// Generate answers for orders "1".."n" from gen(i) instead of the map:
// gen(i).ID must be strconv.Itoa(i) and gen(i).UpdatedAt must not decrease
// with i, so the listing can seek by binary search and page by index.
func (f *FakeOrders) Generate(n int, gen func(i int) FakeOrder) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.genN, f.gen = n, gen
}

// Fail makes every call answer status (0: answer normally again).
func (f *FakeOrders) Fail(status int) { f.fail.Store(int32(status)) }

// FailAfter answers n more calls normally, then fails them with status.
func (f *FakeOrders) FailAfter(n int, status int) {
	f.failAfter.Store(int64(n))
	f.fail.Store(int32(status))
}

// Delay adds d to every call (to keep a run busy).
func (f *FakeOrders) Delay(d time.Duration) { f.delay.Store(int64(d)) }

// BatchCalls and ListCalls count the calls answered 200; MaxBatch is the
// most ids one batch-get carried.
func (f *FakeOrders) BatchCalls() int64 { return f.batchCalls.Load() }
func (f *FakeOrders) ListCalls() int64  { return f.listCalls.Load() }
func (f *FakeOrders) MaxBatch() int64   { return f.maxBatch.Load() }

func (f *FakeOrders) guard(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if d := time.Duration(f.delay.Load()); d > 0 {
			time.Sleep(d)
		}
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(f.token)) != 1 {
			reconProblem(w, http.StatusUnauthorized, "unauthenticated")
			return
		}
		if st := int(f.fail.Load()); st != 0 {
			if f.failAfter.Load() < 0 || f.failAfter.Add(-1) < 0 {
				reconProblem(w, st, "dependency_unavailable")
				return
			}
		}
		h(w, r)
	}
}

func (f *FakeOrders) batchGet(w http.ResponseWriter, r *http.Request) {
	var body struct {
		IDs []string `json:"ids"`
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		reconProblem(w, http.StatusBadRequest, "invalid_json")
		return
	}
	if len(body.IDs) > 500 {
		reconProblem(w, http.StatusBadRequest, "invalid_request")
		return
	}
	for {
		m := f.maxBatch.Load()
		if int64(len(body.IDs)) <= m || f.maxBatch.CompareAndSwap(m, int64(len(body.IDs))) {
			break
		}
	}
	out := make([]fakeOrderJSON, 0, len(body.IDs))
	seen := map[string]bool{}
	for _, id := range body.IDs {
		if seen[id] {
			continue
		}
		seen[id] = true
		if o, ok := f.get(id); ok {
			out = append(out, o.json())
		}
	}
	f.batchCalls.Add(1)
	reconWriteJSON(w, map[string]any{"orders": out})
}

func (f *FakeOrders) get(id string) (FakeOrder, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.gen != nil {
		i, err := strconv.Atoi(id)
		if err != nil || i < 1 || i > f.genN || strconv.Itoa(i) != id {
			return FakeOrder{}, false
		}
		return f.gen(i), true
	}
	o, ok := f.orders[id]
	return o, ok
}

func (f *FakeOrders) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	from, err1 := reconParseTime(q.Get("updated_from"), time.Unix(0, 0))
	to, err2 := reconParseTime(q.Get("updated_to"), time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC))
	limit, err3 := strconv.Atoi(q.Get("limit"))
	if q.Get("limit") == "" {
		limit, err3 = 100, nil
	}
	if err1 != nil || err2 != nil || err3 != nil || limit < 1 || limit > 500 || !from.Before(to) {
		reconProblem(w, http.StatusBadRequest, "invalid_request")
		return
	}
	status := q.Get("status")
	// The cursor is the position after which to continue: the index of the
	// next candidate, base64url ("i:N"), opaque to the client.
	start := -1
	if c := q.Get("cursor"); c != "" {
		b, err := base64.RawURLEncoding.DecodeString(c)
		n, err2 := strconv.Atoi(strings.TrimPrefix(string(b), "i:"))
		if err != nil || err2 != nil || !strings.HasPrefix(string(b), "i:") || n < 0 {
			reconProblem(w, http.StatusBadRequest, "invalid_request")
			return
		}
		start = n
	}
	page, next := f.page(status, from, to, start, limit)
	out := make([]fakeOrderJSON, len(page))
	for i, o := range page {
		out[i] = o.json()
	}
	var cursor *string
	if next >= 0 {
		c := base64.RawURLEncoding.EncodeToString([]byte("i:" + strconv.Itoa(next)))
		cursor = &c
	}
	f.listCalls.Add(1)
	reconWriteJSON(w, map[string]any{"orders": out, "next_cursor": cursor})
}

// page returns up to limit orders of status with from ≤ updated_at < to in
// (updated_at, id) order, from candidate position start (-1: the first),
// and the position to continue from (-1: none left).
func (f *FakeOrders) page(status string, from, to time.Time, start, limit int) ([]FakeOrder, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.gen != nil {
		i := start
		if i < 0 {
			i = 1 + sort.Search(f.genN, func(k int) bool { return !f.gen(k + 1).UpdatedAt.Before(from) })
		}
		var out []FakeOrder
		for ; i <= f.genN; i++ {
			o := f.gen(i)
			if !o.UpdatedAt.Before(to) {
				return out, -1
			}
			if status != "" && o.Status != status {
				continue
			}
			if len(out) == limit {
				return out, i
			}
			out = append(out, o)
		}
		return out, -1
	}
	all := make([]FakeOrder, 0, len(f.orders))
	for _, o := range f.orders {
		if (status == "" || o.Status == status) && !o.UpdatedAt.Before(from) && o.UpdatedAt.Before(to) {
			all = append(all, o)
		}
	}
	sort.Slice(all, func(a, b int) bool {
		if !all[a].UpdatedAt.Equal(all[b].UpdatedAt) {
			return all[a].UpdatedAt.Before(all[b].UpdatedAt)
		}
		if len(all[a].ID) != len(all[b].ID) {
			return len(all[a].ID) < len(all[b].ID)
		}
		return all[a].ID < all[b].ID
	})
	i := max(start, 0)
	if i >= len(all) {
		return nil, -1
	}
	end := min(i+limit, len(all))
	if end == len(all) {
		return all[i:end], -1
	}
	return all[i:end], end
}

type fakeOrderJSON struct {
	ID          string  `json:"id"`
	Status      string  `json:"status"`
	PaymentID   *string `json:"payment_id"`
	AmountCents int64   `json:"amount_cents"`
	Currency    string  `json:"currency"`
	UpdatedAt   string  `json:"updated_at"`
}

func (o FakeOrder) json() fakeOrderJSON {
	j := fakeOrderJSON{ID: o.ID, Status: o.Status, AmountCents: o.AmountCents, Currency: o.Currency,
		UpdatedAt: o.UpdatedAt.UTC().Format(time.RFC3339Nano)}
	if o.PaymentID != "" {
		id := o.PaymentID
		j.PaymentID = &id
	}
	return j
}

func reconParseTime(s string, def time.Time) (time.Time, error) {
	if s == "" {
		return def, nil
	}
	return time.Parse(time.RFC3339Nano, s)
}

func reconWriteJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func reconProblem(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"type":"about:blank","title":%q,"status":%d,"detail":"fake order service","code":%q}`,
		http.StatusText(status), status, code)
}
