package httpapi_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onceonly/onceonly/internal/order/app"
)

// The central guarantee: a thousand copies of one submit, at the same
// moment, create one order; every other answer is that order again or 409.
//
// Not parallel: the load tests run alone, so they neither starve the
// timing-sensitive tests (leases, TTLs, rate limits) nor are starved.
func TestSubmit_ConcurrentDuplicatesCreateOneOrder(t *testing.T) {
	e := newEnv(t, options{})
	key := e.token("alice")
	const n = 1000
	res := make([]resp, n)
	race(n, func(i int) { res[i] = e.submit("alice", key, body1) })

	created, replayed, inUse := 0, 0, 0
	var id string
	ids := map[string]int{}
	for _, r := range res {
		switch r.status {
		case http.StatusCreated:
			created++
			id = decodeOrder(t, r).ID
		case http.StatusOK:
			replayed++
			if r.header.Get("Idempotent-Replayed") != "true" {
				t.Fatalf("200 without Idempotent-Replayed: %v", r)
			}
			ids[decodeOrder(t, r).ID]++
		case http.StatusConflict:
			inUse++
			mustProblem(t, r, http.StatusConflict, "idempotency_key_in_use")
		default:
			t.Fatalf("unexpected answer %v", r)
		}
	}
	if created != 1 {
		t.Fatalf("%d answers were 201, want exactly 1", created)
	}
	for got := range ids {
		if got != id {
			t.Fatalf("a replay answered order %s, the created one is %s", got, id)
		}
	}
	if rows := e.countOrders(""); rows != 1 {
		t.Fatalf("%d order rows, want 1", rows)
	}
	t.Logf("1 created, %d replayed, %d in use", replayed, inUse)
}

// 100 tokens, each submitted 50 times, all at once: 100 orders.
//
// On the embedded stand-ins each token gets 10 copies instead: miniredis runs
// every script through one mutex and a Lua interpreter written in Go, and
// under -race 5,000 overlapping submits queue past the attempt deadline on
// a 2-core machine — a limit of the stand-in, not of the service. CI (real
// MariaDB and Redis) runs the full figure.
func TestSubmit_ManyTokensConcurrentlyCreateOneOrderEach(t *testing.T) {
	e := newEnv(t, options{})
	tokens, copies := 100, 50
	if !realRedis() {
		copies = 10
	}
	keys := make([]string, tokens)
	for i := range keys {
		// One user holds at most 100 unused tokens; spread them.
		keys[i] = e.token(fmt.Sprintf("user-%d", i%10))
	}
	res := make([]resp, tokens*copies)
	race(len(res), func(i int) {
		k := i % tokens
		res[i] = e.submit(fmt.Sprintf("user-%d", k%10), keys[k], body1)
	})
	created := make([]int, tokens)
	orderOf := make([]string, tokens)
	for i, r := range res {
		k := i % tokens
		switch r.status {
		case http.StatusCreated, http.StatusOK:
			o := decodeOrder(t, r)
			if r.status == http.StatusCreated {
				created[k]++
			}
			if orderOf[k] != "" && orderOf[k] != o.ID {
				t.Fatalf("token %d answered orders %s and %s", k, orderOf[k], o.ID)
			}
			orderOf[k] = o.ID
		case http.StatusConflict:
		default:
			t.Fatalf("unexpected answer %v", r)
		}
	}
	for k, c := range created {
		if c != 1 {
			t.Fatalf("token %d: %d answers were 201, want 1", k, c)
		}
	}
	if rows := e.countOrders(""); rows != int64(tokens) {
		t.Fatalf("%d order rows, want %d", rows, tokens)
	}
}

func TestSubmit_KeySemantics(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	key := e.token("alice")

	first := e.submit("alice", key, body1)
	if first.status != http.StatusCreated || first.header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("first submit: %v %v", first, first.header)
	}
	o := decodeOrder(t, first)
	if o.UserID != "alice" || o.Status != "PENDING_PAYMENT" || o.AmountCents != 700 || o.Currency != "CNY" ||
		o.PaymentID != nil || o.Version != 1 || len(o.Items) != 1 || o.Items[0].SKU != "apple" {
		t.Fatalf("created order %+v", o)
	}
	if got := first.header.Get("Location"); got != "/v1/orders/"+o.ID {
		t.Errorf("Location = %q", got)
	}

	t.Run("same key and body replays the same order", func(t *testing.T) {
		// Another spelling of the same JSON is the same request.
		same := "{ \"items\": [ {\"price_cents\":350, \"sku\":\"apple\", \"quantity\":2} ],\n \"currency\":\"CNY\" }"
		r := e.submit("alice", key, same)
		if r.status != http.StatusOK || r.header.Get("Idempotent-Replayed") != "true" || decodeOrder(t, r).ID != o.ID {
			t.Fatalf("replay: %v %v", r, r.header)
		}
	})
	t.Run("same key, different body is 422", func(t *testing.T) {
		mustProblem(t, e.submit("alice", key, body2), http.StatusUnprocessableEntity, "idempotency_key_reused")
	})
	t.Run("no key is 400 idempotency_key_missing", func(t *testing.T) {
		mustProblem(t, e.submit("alice", "", body1), http.StatusBadRequest, "idempotency_key_missing")
		// Even when the body is bad too: the key is the first thing to fix.
		mustProblem(t, e.submit("alice", "", "{"), http.StatusBadRequest, "idempotency_key_missing")
	})
	t.Run("unknown key is 400 idempotency_key_invalid", func(t *testing.T) {
		mustProblem(t, e.submit("alice", "AAAAAAAAAAAAAAAAAAAAAAAAAA", body1), http.StatusBadRequest, "idempotency_key_invalid")
	})
	t.Run("malformed key is 400 idempotency_key_invalid", func(t *testing.T) {
		for _, k := range []string{"short", strings.Repeat("A", 65), "ÄÖÜÄÖÜÄÖÜÄÖÜÄÖÜÄÖÜÄÖÜ", "has space in the middle of it"} {
			mustProblem(t, e.submit("alice", k, body1), http.StatusBadRequest, "idempotency_key_invalid")
		}
	})
	t.Run("another user's key is 400 idempotency_key_invalid, used or not", func(t *testing.T) {
		mustProblem(t, e.submit("bob", key, body1), http.StatusBadRequest, "idempotency_key_invalid")
		mustProblem(t, e.submit("bob", e.token("alice"), body1), http.StatusBadRequest, "idempotency_key_invalid")
		// User ids are case-sensitive: "Alice" is someone else.
		mustProblem(t, e.submit("Alice", key, body1), http.StatusBadRequest, "idempotency_key_invalid")
	})
	t.Run("key case matters", func(t *testing.T) {
		mustProblem(t, e.submit("alice", strings.ToLower(key), body1), http.StatusBadRequest, "idempotency_key_invalid")
	})
	if rows := e.countOrders(""); rows != 1 {
		t.Fatalf("%d order rows, want 1", rows)
	}
}

func TestSubmit_ExpiredUnusedTokenIsInvalid(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{cfg: func(c *app.Config) { c.TokenTTL, c.SubmitLease = time.Second, 900*time.Millisecond }})
	key := e.token("alice")
	time.Sleep(1300 * time.Millisecond)
	mustProblem(t, e.submit("alice", key, body1), http.StatusBadRequest, "idempotency_key_invalid")
	if rows := e.countOrders(""); rows != 0 {
		t.Fatalf("%d order rows, want 0", rows)
	}
}

// A refused body answers 400 with a detail that names the problem, and
// never uses up the key: the corrected request then succeeds with it.
func TestSubmit_InvalidBodyIsPrecise400AndKeepsTheKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	item := func(q, p int64) string { return fmt.Sprintf(`{"sku":"s","quantity":%d,"price_cents":%d}`, q, p) }
	items := func(n int) string { return strings.TrimSuffix(strings.Repeat(item(1, 1)+",", n), ",") }
	cases := []struct {
		name, body, code, detail string
		status                   int
	}{
		{"malformed JSON", `{"currency":"CNY","items":[`, "invalid_json", "unexpected end", 400},
		{"syntax error", `{"currency":"CNY",}`, "invalid_json", "Malformed JSON at byte offset", 400},
		{"unknown field", `{"currency":"CNY","items":[` + item(1, 1) + `],"coupon":"X"}`, "invalid_json", `Unknown field "coupon"`, 400},
		{"unknown item field", `{"currency":"CNY","items":[{"sku":"s","quantity":1,"price_cents":1,"color":"red"}]}`, "invalid_json", `Unknown field "color"`, 400},
		{"wrong type", `{"currency":"CNY","items":[{"sku":"s","quantity":"1","price_cents":1}]}`, "invalid_json", `"items.quantity" must be an integer`, 400},
		{"fractional quantity", `{"currency":"CNY","items":[{"sku":"s","quantity":1.5,"price_cents":1}]}`, "invalid_json", `"items.quantity" must be an integer`, 400},
		{"empty body", ``, "invalid_json", "empty", 400},
		{"null body", `null`, "invalid_json", "null", 400},
		{"trailing data", `{"currency":"CNY","items":[` + item(1, 1) + `]} {}`, "invalid_json", "after the JSON value", 400},
		{"no items", `{"currency":"CNY","items":[]}`, "invalid_request", "items must hold 1 to 50 items; got 0", 400},
		{"items missing", `{"currency":"CNY"}`, "invalid_request", "items must hold 1 to 50 items; got 0", 400},
		{"51 items", `{"currency":"CNY","items":[` + items(51) + `]}`, "invalid_request", "items must hold 1 to 50 items; got 51", 400},
		{"quantity 0", `{"currency":"CNY","items":[` + item(1, 1) + "," + item(0, 1) + `]}`, "invalid_request", "items[1].quantity must be 1 to 1000; got 0", 400},
		{"quantity 1001", `{"currency":"CNY","items":[` + item(1001, 1) + `]}`, "invalid_request", "items[0].quantity must be 1 to 1000; got 1001", 400},
		{"negative price", `{"currency":"CNY","items":[` + item(1, -5) + `]}`, "invalid_request", "items[0].price_cents must be 1 to 1000000000; got -5", 400},
		{"price over 1e9", `{"currency":"CNY","items":[` + item(1, 1_000_000_001) + `]}`, "invalid_request", "items[0].price_cents must be 1 to 1000000000; got 1000000001", 400},
		{"overflowing total", `{"currency":"CNY","items":[` + item(1000, 1_000_000_000) + "," + item(1, 1) + `]}`, "invalid_request", "must be at most 1000000000000; got 1000000000001", 400},
		{"price beyond int64", `{"currency":"CNY","items":[{"sku":"s","quantity":1,"price_cents":99999999999999999999}]}`, "invalid_json", `"items.price_cents" must be an integer`, 400},
		{"lower-case currency", `{"currency":"cny","items":[` + item(1, 1) + `]}`, "invalid_request", `currency must be an ISO 4217 code`, 400},
		{"no currency", `{"items":[` + item(1, 1) + `]}`, "invalid_request", `currency must be an ISO 4217 code`, 400},
		{"empty sku", `{"currency":"CNY","items":[{"sku":" ","quantity":1,"price_cents":1}]}`, "invalid_request", "items[0].sku must not be empty", 400},
		{"long sku", `{"currency":"CNY","items":[{"sku":"` + strings.Repeat("x", 65) + `","quantity":1,"price_cents":1}]}`, "invalid_request", "items[0].sku must be at most 64 bytes; got 65", 400},
		{"control character in sku", `{"currency":"CNY","items":[{"sku":"a\u0000b","quantity":1,"price_cents":1}]}`, "invalid_request", "control characters", 400},
		{"body over 64 KiB", `{"currency":"CNY","items":[{"sku":"` + strings.Repeat("x", 64<<10) + `","quantity":1,"price_cents":1}]}`, "body_too_large", "exceeds 65536 bytes", 413},
	}
	key := e.token("alice")
	for _, tc := range cases {
		r := e.submit("alice", key, tc.body)
		p := mustProblem(t, r, tc.status, tc.code)
		if !strings.Contains(p.Detail, tc.detail) {
			t.Errorf("%s: detail %q does not say %q", tc.name, p.Detail, tc.detail)
		}
	}
	if rows := e.countOrders(""); rows != 0 {
		t.Fatalf("%d order rows after refused bodies, want 0", rows)
	}
	// Bounds are inclusive, and the key is still unused.
	edge := `{"currency":"JPY","items":[` + item(1000, 1_000_000_000) + `]}`
	r := e.submit("alice", key, edge)
	if r.status != http.StatusCreated || decodeOrder(t, r).AmountCents != 1_000_000_000_000 {
		t.Fatalf("submit at the bounds with the same key: %v", r)
	}
	r = e.submit("alice", e.token("alice"), `{"currency":"CNY","items":[`+items(50)+`]}`)
	if r.status != http.StatusCreated || len(decodeOrder(t, r).Items) != 50 {
		t.Fatalf("50 items: %v", r)
	}
}

// Submit tokens: 201 with a token and its expiry; at most 100 unused per
// user (429 too_many_tokens beyond); the route takes no input.
func TestTokens_IssueContract(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	before := time.Now()
	r := e.do(http.MethodPost, "/v1/orders/tokens", "alice", "{}")
	if r.status != http.StatusCreated {
		t.Fatalf("{} body: %v", r)
	}
	var tok struct {
		Token     string `json:"token"`
		ExpiresAt string `json:"expires_at"`
	}
	mustJSON(t, r.body, &tok)
	exp, err := time.Parse(time.RFC3339Nano, tok.ExpiresAt)
	if err != nil || len(tok.Token) < 16 || !strings.HasSuffix(tok.ExpiresAt, "Z") {
		t.Fatalf("token %+v (%v)", tok, err)
	}
	if d := exp.Sub(before); d < 29*time.Minute || d > 31*time.Minute {
		t.Errorf("token lives %v, want 30 min", d)
	}
	mustProblem(t, e.do(http.MethodPost, "/v1/orders/tokens", "alice", `{"x":1}`), 400, "invalid_json")

	var wg sync.WaitGroup
	var mu sync.Mutex
	var bad []resp
	for range 99 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r := e.do(http.MethodPost, "/v1/orders/tokens", "alice", ""); r.status != http.StatusCreated {
				mu.Lock()
				bad = append(bad, r)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(bad) > 0 {
		t.Fatalf("tokens 2–100 refused: %v", bad)
	}
	mustProblem(t, e.do(http.MethodPost, "/v1/orders/tokens", "alice", ""), 429, "too_many_tokens")
	// Another user has their own allowance.
	e.token("bob")
}
