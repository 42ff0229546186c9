// Package paymentclient is the order service's HTTP adapter to the payment
// service: it implements order.Payments over POST /v1/payments and
// GET /v1/payments/{id} with the internal bearer token.
//
// Guarantees: every attempt is bounded by Config.Timeout; network errors,
// timeouts and 5xx answers are retried (Config.Attempts in all, with
// jittered exponential backoff) because both calls are safe to repeat —
// creation is idempotent on the order id, so a retry after a lost 201
// answers 200 with the same payment. The caller's X-Request-ID travels with
// every attempt, so one trace spans both services.
//
// Failure boundary: after the last attempt the error wraps
// order.ErrPaymentsUnavailable and nothing is known about the payment (it
// may exist: a retry of /pay finds it). A retried creation whose first
// attempt did create the payment answers 200, not 201. 4xx answers are
// never retried: they are decisions (409) or our own bugs (400, 401).
package paymentclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/onceonly/onceonly/internal/order"
	"github.com/onceonly/onceonly/internal/platform/httpx"
)

// Config configures a Client. Zero values take the defaults.
type Config struct {
	// BaseURL is the payment service (PAYMENT_SERVICE_URL), e.g.
	// "http://payment:8081".
	BaseURL string
	// Token is the internal bearer token (INTERNAL_API_TOKEN).
	Token string
	// Timeout bounds one attempt, connection included (default 2s).
	Timeout time.Duration
	// Attempts is the number of tries of one call (default 3).
	Attempts int
	// Backoff is the pause before the second attempt, doubled for each
	// further one, ±50% jitter (default 100ms).
	Backoff time.Duration
	// Transport, if set, replaces http.DefaultTransport (tests).
	Transport http.RoundTripper
}

// Client implements order.Payments. It is safe for concurrent use.
type Client struct {
	base   *url.URL
	token  string
	http   *http.Client
	cfg    Config
	jitter func() float64
}

var _ order.Payments = (*Client)(nil)

// New checks cfg and returns a Client; it does not connect. The error names
// the variable that is wrong.
func New(cfg Config) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(cfg.BaseURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("config: PAYMENT_SERVICE_URL: want an http(s) URL, got %q", cfg.BaseURL)
	}
	if cfg.Token == "" {
		return nil, errors.New("config: INTERNAL_API_TOKEN: required but not set")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Second
	}
	if cfg.Attempts <= 0 {
		cfg.Attempts = 3
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = 100 * time.Millisecond
	}
	tr := cfg.Transport
	if tr == nil {
		tr = http.DefaultTransport
	}
	return &Client{base: u, token: cfg.Token, http: &http.Client{Transport: tr}, cfg: cfg, jitter: rand.Float64}, nil
}

// createBody is POST /v1/payments' body (DESIGN.md, payment service).
type createBody struct {
	OrderID     string `json:"order_id"`
	UserID      string `json:"user_id"`
	AmountCents int64  `json:"amount_cents"`
	Currency    string `json:"currency"`
}

// paymentJSON is the payment service's payment; fields we do not use are
// ignored, so the payment service may add some.
type paymentJSON struct {
	ID          string `json:"id"`
	OrderID     string `json:"order_id"`
	Status      string `json:"status"`
	AmountCents int64  `json:"amount_cents"`
	Currency    string `json:"currency"`
}

type problemJSON struct {
	Code string `json:"code"`
}

// Create implements order.Payments.
func (c *Client) Create(ctx context.Context, req order.PaymentRequest) (order.Payment, bool, error) {
	body, err := json.Marshal(createBody(req))
	if err != nil {
		return order.Payment{}, false, err
	}
	status, raw, err := c.do(ctx, http.MethodPost, "/v1/payments", body)
	if err != nil {
		return order.Payment{}, false, err
	}
	switch status {
	case http.StatusCreated, http.StatusOK:
		p, err := decodePayment(raw)
		return p, status == http.StatusCreated, err
	case http.StatusConflict:
		switch problemCode(raw) {
		case "payment_mismatch":
			return order.Payment{}, false, fmt.Errorf("paymentclient: order %s: %w", req.OrderID, order.ErrPaymentMismatch)
		case "invalid_transition":
			return order.Payment{}, false, fmt.Errorf("paymentclient: order %s: %w", req.OrderID, order.ErrPaymentRefused)
		}
	}
	return order.Payment{}, false, unexpected("POST /v1/payments", status, raw)
}

// Get implements order.Payments.
func (c *Client) Get(ctx context.Context, id string) (order.Payment, error) {
	status, raw, err := c.do(ctx, http.MethodGet, "/v1/payments/"+url.PathEscape(id), nil)
	if err != nil {
		return order.Payment{}, err
	}
	switch status {
	case http.StatusOK:
		return decodePayment(raw)
	case http.StatusNotFound:
		return order.Payment{}, fmt.Errorf("paymentclient: payment %s: %w", id, order.ErrPaymentNotFound)
	}
	return order.Payment{}, unexpected("GET /v1/payments/{id}", status, raw)
}

// maxAnswer bounds what is read of an answer: a payment is far smaller.
const maxAnswer = 64 << 10

// do sends the request up to Attempts times and returns the first answer
// that is not a 5xx. After the last failed attempt the error wraps
// order.ErrPaymentsUnavailable; a done ctx stops the retries at once.
func (c *Client) do(ctx context.Context, method, path string, body []byte) (int, []byte, error) {
	var last error
	for attempt := range c.cfg.Attempts {
		if attempt > 0 && !c.pause(ctx, attempt) {
			break
		}
		status, raw, err := c.once(ctx, method, path, body)
		if err == nil && status < 500 {
			return status, raw, nil
		}
		if err == nil {
			err = fmt.Errorf("answered %d", status)
		}
		last = err
	}
	if last == nil {
		last = ctx.Err()
	}
	return 0, nil, fmt.Errorf("paymentclient: %s %s: %w: %w", method, path, order.ErrPaymentsUnavailable, last)
}

func (c *Client) once(ctx context.Context, method, path string, body []byte) (int, []byte, error) {
	actx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(actx, method, c.base.String()+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if id := httpx.RequestIDFrom(ctx); id != "" {
		req.Header.Set(httpx.RequestIDHeader, id)
	}
	res, err := c.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, maxAnswer))
	if err != nil {
		return 0, nil, err // a cut-off answer is a network error: retry
	}
	return res.StatusCode, raw, nil
}

// pause waits before attempt (1, 2, …); false if ctx ended first.
func (c *Client) pause(ctx context.Context, attempt int) bool {
	d := c.cfg.Backoff << (attempt - 1)
	d = time.Duration(float64(d) * (0.5 + c.jitter()))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func decodePayment(raw []byte) (order.Payment, error) {
	var p paymentJSON
	if err := json.Unmarshal(raw, &p); err != nil || p.ID == "" {
		return order.Payment{}, fmt.Errorf("paymentclient: undecodable payment %q: %v", clip(raw), err)
	}
	return order.Payment(p), nil
}

func problemCode(raw []byte) string {
	var p problemJSON
	_ = json.Unmarshal(raw, &p)
	return p.Code
}

func unexpected(call string, status int, raw []byte) error {
	return fmt.Errorf("paymentclient: %s answered %d %s", call, status, clip(raw))
}

func clip(b []byte) string {
	if len(b) > 256 {
		return string(b[:256]) + "…"
	}
	return string(b)
}
