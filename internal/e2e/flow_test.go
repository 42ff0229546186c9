package e2e_test

import (
	"net/http"
	"testing"
	"time"
)

type payment struct {
	PaymentID   string `json:"payment_id"`
	OrderID     string `json:"order_id"`
	Status      string `json:"status"`
	AmountCents int64  `json:"amount_cents"`
	Currency    string `json:"currency"`
}

// The happy path across both services: a submitted order is paid once even
// though the gateway delivers its callback five times, and the order turns
// PAID through the outbox, Kafka and the idempotent consumer.
func TestE2E_DuplicatedCallbacksPayTheOrderOnce(t *testing.T) {
	t.Parallel()
	s := startSystem(t, nil)
	o := s.placeOrder("alice", 1999)

	var p1, p2 payment
	code, _ := s.do("POST", s.OrderURL+"/v1/orders/"+o.ID+"/pay", user("alice"), nil, &p1)
	must(t, code == http.StatusCreated && p1.Status == "PENDING" && p1.AmountCents == 1999, "first /pay: %d %+v", code, p1)
	code, _ = s.do("POST", s.OrderURL+"/v1/orders/"+o.ID+"/pay", user("alice"), map[string]any{}, &p2)
	must(t, code == http.StatusOK && p2.PaymentID == p1.PaymentID, "second /pay: %d %+v, want 200 with %s", code, p2, p1.PaymentID)

	var sandbox struct {
		Results map[string]int `json:"results"`
	}
	code, _ = s.do("POST", s.PaymentURL+"/v1/sandbox/payments/"+p1.PaymentID+"/complete", nil,
		map[string]any{"status": "SUCCEEDED", "copies": 5}, &sandbox)
	must(t, code == http.StatusOK, "sandbox: %d", code)
	must(t, sandbox.Results["processed"] == 1 && sandbox.Results["duplicate"] == 4, "callback results %v, want 1 processed + 4 duplicate", sandbox.Results)

	paid := s.waitOrder("alice", o.ID, 30*time.Second, func(o order) bool { return o.Status == "PAID" })
	must(t, paid.Version == o.Version+2 || paid.Version == o.Version+1, "version %d after PAID (created at %d)", paid.Version, o.Version)
	must(t, paid.PaymentID != nil && *paid.PaymentID == p1.PaymentID, "order's payment_id %v, want %s", paid.PaymentID, p1.PaymentID)

	var p3 payment
	code, _ = s.do("POST", s.OrderURL+"/v1/orders/"+o.ID+"/pay", user("alice"), nil, &p3)
	must(t, code == http.StatusOK && p3.Status == "SUCCEEDED" && p3.PaymentID == p1.PaymentID, "/pay on PAID: %d %+v", code, p3)
	code, _ = s.do("POST", s.OrderURL+"/v1/orders/"+o.ID+"/cancel", user("alice"), nil, nil)
	must(t, code == http.StatusConflict, "cancel of a PAID order: %d, want 409", code)

	// Someone else's order stays invisible, to /pay too.
	code, _ = s.do("POST", s.OrderURL+"/v1/orders/"+o.ID+"/pay", user("mallory"), nil, nil)
	must(t, code == http.StatusNotFound, "/pay by another user: %d, want 404", code)
}

func TestE2E_CancelledOrderCannotBePaid(t *testing.T) {
	t.Parallel()
	s := startSystem(t, nil)
	o := s.placeOrder("bob", 500)
	code, _ := s.do("POST", s.OrderURL+"/v1/orders/"+o.ID+"/cancel", user("bob"), nil, nil)
	must(t, code == http.StatusOK, "cancel: %d", code)
	var problem struct{ Code string }
	code, _ = s.do("POST", s.OrderURL+"/v1/orders/"+o.ID+"/pay", user("bob"), nil, &problem)
	must(t, code == http.StatusConflict && problem.Code == "invalid_transition", "/pay on CANCELLED: %d %q", code, problem.Code)
}

// A client can never create or read a payment by calling the payment
// service directly: every /v1/ route but the callback and the sandbox needs
// the internal token.
func TestE2E_PaymentServiceRefusesCallsWithoutTheInternalToken(t *testing.T) {
	t.Parallel()
	s := startSystem(t, nil)
	body := map[string]any{"order_id": "1", "user_id": "eve", "amount_cents": 100, "currency": "CNY"}
	for _, tc := range []struct{ method, path string }{
		{"POST", "/v1/payments"}, {"GET", "/v1/payments/1"},
		{"POST", "/v1/reconciliations"}, {"GET", "/v1/reconciliations/latest"},
	} {
		var b any
		if tc.method == "POST" {
			b = body
		}
		code, _ := s.do(tc.method, s.PaymentURL+tc.path, map[string]string{"Authorization": "Bearer wrong"}, b, nil)
		must(t, code == http.StatusUnauthorized, "%s %s with a wrong token: %d, want 401", tc.method, tc.path, code)
	}
	code, _ := s.do("GET", s.PaymentURL+"/v1/payments/1", bearer(), nil, nil)
	must(t, code == http.StatusNotFound, "no payment was created: GET with the token = %d, want 404", code)
}
