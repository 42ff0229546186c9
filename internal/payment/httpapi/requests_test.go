package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/onceonly/onceonly/internal/payment"
	"github.com/onceonly/onceonly/internal/platform/httpx"
)

type resp struct {
	status int
	header http.Header
	body   []byte
}

func (r resp) String() string { return fmt.Sprintf("%d %s", r.status, r.body) }

// do sends one request; headers are name, value pairs. It never fails the
// test (it may run in many goroutines): a transport error is status 0.
func (e *env) do(method, path, body string, headers ...string) resp {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, e.url+path, rd)
	if err != nil {
		return resp{body: []byte(err.Error())}
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := e.client.Do(req)
	if err != nil {
		return resp{body: []byte(err.Error())}
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return resp{status: res.StatusCode, header: res.Header, body: b}
}

var bearer = []string{"Authorization", "Bearer " + internalToken}

func createBody(order string, amount int64, currency string) string {
	return fmt.Sprintf(`{"order_id":%q,"user_id":"alice","amount_cents":%d,"currency":%q}`, order, amount, currency)
}

func (e *env) post(order string, amount int64, currency string) resp {
	return e.do(http.MethodPost, "/v1/payments", createBody(order, amount, currency), bearer...)
}

// create makes the order's payment and returns it (201 expected).
func (e *env) create(order string, amount int64, currency string) paymentJSON {
	e.t.Helper()
	r := e.post(order, amount, currency)
	if r.status != http.StatusCreated {
		e.t.Fatalf("POST /v1/payments: %v", r)
	}
	return decodePayment(e.t, r)
}

func (e *env) get(id string) paymentJSON {
	e.t.Helper()
	r := e.do(http.MethodGet, "/v1/payments/"+id, "", bearer...)
	if r.status != http.StatusOK {
		e.t.Fatalf("GET /v1/payments/%s: %v", id, r)
	}
	return decodePayment(e.t, r)
}

// cbBody is a callback body for p.
func cbBody(p paymentJSON, status, txn string) string {
	return fmt.Sprintf(`{"payment_id":%q,"gateway_txn_id":%q,"status":%q,"amount_cents":%d,"currency":%q}`,
		p.ID, txn, status, p.AmountCents, p.Currency)
}

// signed returns the gateway headers for body at ts signed with key.
func signed(key string, ts time.Time, body string) []string {
	s := strconv.FormatInt(ts.Unix(), 10)
	return []string{payment.TimestampHeader, s, payment.SignatureHeader, payment.Sign(key, s, []byte(body))}
}

// callback sends body signed now with the current key, plus extra headers.
func (e *env) callback(body string, extra ...string) resp {
	return e.do(http.MethodPost, "/v1/payments/callback", body, append(signed(currentKey, e.now(), body), extra...)...)
}

type paymentJSON struct {
	ID           string  `json:"id"`
	OrderID      string  `json:"order_id"`
	Attempt      int     `json:"attempt"`
	Status       string  `json:"status"`
	AmountCents  int64   `json:"amount_cents"`
	Currency     string  `json:"currency"`
	GatewayTxnID *string `json:"gateway_txn_id"`
	CreatedAt    string  `json:"created_at"`
	UpdatedAt    string  `json:"updated_at"`
}

func decodePayment(t testing.TB, r resp) paymentJSON {
	t.Helper()
	var p paymentJSON
	mustJSON(t, r.body, &p)
	if p.ID == "" {
		t.Fatalf("no payment in %v", r)
	}
	return p
}

func mustJSON(t testing.TB, b []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
}

type problem struct {
	Type, Title, Detail, Code string
	Status                    int
}

// mustProblem checks r is a problem+json with status and code.
func mustProblem(t testing.TB, r resp, status int, code string) problem {
	t.Helper()
	var p problem
	if r.status != status || !strings.HasPrefix(r.header.Get("Content-Type"), httpx.ProblemContentType) {
		t.Fatalf("got %v (%s), want %d %s", r, r.header.Get("Content-Type"), status, code)
	}
	if err := json.Unmarshal(r.body, &p); err != nil || p.Code != code || p.Status != status {
		t.Fatalf("problem %s (err %v), want code %s status %d", r.body, err, code, status)
	}
	return p
}

// mustResult checks r is 200 {"result": want}.
func mustResult(t testing.TB, r resp, want string) {
	t.Helper()
	if r.status != http.StatusOK || string(r.body) != `{"result":"`+want+`"}` {
		t.Fatalf("got %v, want 200 {\"result\":%q}", r, want)
	}
}
