package testkit

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// FakePayments is an in-memory payment service speaking the contract the
// order service relies on (DESIGN.md, "payment service"): POST /v1/payments
// (201 new / 200 the order's live payment / 409 payment_mismatch / 409
// invalid_transition after a refund) and GET /v1/payments/{id}, both behind
// the internal bearer token. It counts calls, can fail the next N calls with
// 503, and records the X-Request-ID of each call.
type FakePayments struct {
	URL   string
	token string

	mu         sync.Mutex
	byOrder    map[string][]*FakePayment
	byID       map[string]*FakePayment
	nextID     int
	creates    int
	gets       int
	failNext   int
	requestIDs []string
	onCreate   func(orderID string)
}

// FakePayment is one payment attempt held by FakePayments.
type FakePayment struct {
	ID, OrderID, UserID, Status string
	Attempt                     int
	AmountCents                 int64
	Currency                    string
}

// NewFakePayments starts the fake on a loopback port, closed when the test
// ends; requests must carry "Authorization: Bearer token".
func NewFakePayments(t testing.TB, token string) *FakePayments {
	t.Helper()
	f := &FakePayments{token: token, byOrder: map[string][]*FakePayment{}, byID: map[string]*FakePayment{}, nextID: 1000}
	srv := httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(srv.Close)
	f.URL = srv.URL
	return f
}

// FailNext makes the next n calls answer 503 dependency_unavailable.
func (f *FakePayments) FailNext(n int) { f.mu.Lock(); f.failNext = n; f.mu.Unlock() }

// OnCreate runs fn(order_id) inside every accepted create, before it
// answers (a test changes the order meanwhile).
func (f *FakePayments) OnCreate(fn func(orderID string)) { f.mu.Lock(); f.onCreate = fn; f.mu.Unlock() }

// Calls returns how many creates and gets arrived (failed ones included).
func (f *FakePayments) Calls() (creates, gets int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.creates, f.gets
}

// RequestIDs returns the X-Request-ID of every call, in arrival order.
func (f *FakePayments) RequestIDs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.requestIDs...)
}

// Attempts returns the order's payment attempts, oldest first.
func (f *FakePayments) Attempts(orderID string) []FakePayment {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []FakePayment
	for _, p := range f.byOrder[orderID] {
		out = append(out, *p)
	}
	return out
}

// SetStatus sets a payment's status, as the gateway's callback would.
func (f *FakePayments) SetStatus(id, status string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p := f.byID[id]; p != nil {
		p.Status = status
	}
}

// Add stores a payment as if created earlier, and returns its id.
func (f *FakePayments) Add(p FakePayment) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextID++
	p.ID = strconv.Itoa(f.nextID)
	p.Attempt = len(f.byOrder[p.OrderID]) + 1
	f.byOrder[p.OrderID] = append(f.byOrder[p.OrderID], &p)
	f.byID[p.ID] = &p
	return p.ID
}

func (f *FakePayments) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.requestIDs = append(f.requestIDs, r.Header.Get("X-Request-ID"))
	isCreate := r.Method == http.MethodPost && r.URL.Path == "/v1/payments"
	if isCreate {
		f.creates++
	} else {
		f.gets++
	}
	fail := f.failNext > 0
	if fail {
		f.failNext--
	}
	onCreate := f.onCreate
	f.mu.Unlock()

	switch {
	case r.Header.Get("Authorization") != "Bearer "+f.token:
		fakePaymentsProblem(w, http.StatusUnauthorized, "unauthenticated")
	case fail:
		fakePaymentsProblem(w, http.StatusServiceUnavailable, "dependency_unavailable")
	case isCreate:
		f.create(w, r, onCreate)
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/payments/"):
		f.mu.Lock()
		p := f.byID[strings.TrimPrefix(r.URL.Path, "/v1/payments/")]
		var cp FakePayment
		if p != nil {
			cp = *p
		}
		f.mu.Unlock()
		if p == nil {
			fakePaymentsProblem(w, http.StatusNotFound, "not_found")
			return
		}
		fakePaymentsAnswer(w, http.StatusOK, cp)
	default:
		fakePaymentsProblem(w, http.StatusNotFound, "not_found")
	}
}

func (f *FakePayments) create(w http.ResponseWriter, r *http.Request, onCreate func(string)) {
	var body struct {
		OrderID     string `json:"order_id"`
		UserID      string `json:"user_id"`
		AmountCents int64  `json:"amount_cents"`
		Currency    string `json:"currency"`
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil || body.OrderID == "" || body.UserID == "" || body.AmountCents < 1 || len(body.Currency) != 3 {
		fakePaymentsProblem(w, http.StatusBadRequest, "invalid_request")
		return
	}
	f.mu.Lock()
	status, out, code := http.StatusCreated, FakePayment{}, ""
	attempts := f.byOrder[body.OrderID]
	if n := len(attempts); n > 0 {
		latest := attempts[n-1]
		switch latest.Status {
		case "PENDING", "SUCCEEDED":
			status, out = http.StatusOK, *latest
			if latest.AmountCents != body.AmountCents || latest.Currency != body.Currency {
				code = "payment_mismatch"
			}
		case "REFUNDED":
			code = "invalid_transition"
		}
	}
	if status == http.StatusCreated && code == "" {
		f.nextID++
		p := &FakePayment{ID: strconv.Itoa(f.nextID), OrderID: body.OrderID, UserID: body.UserID, Status: "PENDING",
			Attempt: len(attempts) + 1, AmountCents: body.AmountCents, Currency: body.Currency}
		f.byOrder[body.OrderID] = append(attempts, p)
		f.byID[p.ID] = p
		out = *p
	}
	f.mu.Unlock()
	if code != "" {
		fakePaymentsProblem(w, http.StatusConflict, code)
		return
	}
	if onCreate != nil {
		onCreate(body.OrderID)
	}
	fakePaymentsAnswer(w, status, out)
}

func fakePaymentsAnswer(w http.ResponseWriter, status int, p FakePayment) {
	now := time.Now().UTC().Format(time.RFC3339Nano)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": p.ID, "order_id": p.OrderID, "attempt": p.Attempt, "status": p.Status,
		"amount_cents": p.AmountCents, "currency": p.Currency, "gateway_txn_id": nil,
		"created_at": now, "updated_at": now,
	})
}

func fakePaymentsProblem(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"type": "about:blank", "title": code, "status": status, "detail": code, "code": code})
}
