// Package orderclient is the payment service's HTTP adapter to the order
// service's internal API (reconcile.Orders): POST /internal/v1/orders/batch-get
// and GET /internal/v1/orders?status=PAID, with the INTERNAL_API_TOKEN
// bearer token.
//
// Every attempt is bounded by Config.Timeout; transport errors, 429 and 5xx
// answers are retried (Config.Attempts in all, with a short backoff), other
// answers are not. An answer is used only if it decodes completely; anything
// less is an error, and reconciliation then classifies nothing on it.
package orderclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/onceonly/onceonly/internal/payment/reconcile"
)

// Defaults of Config.
const (
	DefaultTimeout  = 10 * time.Second
	DefaultAttempts = 3
	// maxBody bounds an answer: 500 orders take ~100 KiB.
	maxBody = 8 << 20
)

// Config configures a Client.
type Config struct {
	// BaseURL is the order service (ORDER_SERVICE_URL), e.g. http://order:8080.
	BaseURL string
	// Token is the internal bearer token (INTERNAL_API_TOKEN).
	Token string
	// Timeout bounds one attempt (default 10s).
	Timeout time.Duration
	// Attempts is the most tries of one call (default 3).
	Attempts int
	// Backoff is the wait before try n+1 (default 100ms·3^(n-1): 100ms, 300ms).
	Backoff func(n int) time.Duration
	// HTTP is the client to use (nil: one of its own).
	HTTP *http.Client
}

// Client implements reconcile.Orders. Safe for concurrent use.
type Client struct {
	base  string
	token string
	cfg   Config
	http  *http.Client
}

var _ reconcile.Orders = (*Client)(nil)

// New checks cfg and returns a Client; it does not contact the service.
func New(cfg Config) (*Client, error) {
	u, err := url.Parse(cfg.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("config: ORDER_SERVICE_URL: want an http(s) URL, got %q", cfg.BaseURL)
	}
	if cfg.Token == "" {
		return nil, errors.New("config: INTERNAL_API_TOKEN: required for the order service")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Attempts <= 0 {
		cfg.Attempts = DefaultAttempts
	}
	if cfg.Backoff == nil {
		cfg.Backoff = func(n int) time.Duration {
			d := 100 * time.Millisecond
			for range n - 1 {
				d *= 3
			}
			return d
		}
	}
	c := &Client{base: strings.TrimSuffix(cfg.BaseURL, "/"), token: cfg.Token, cfg: cfg, http: cfg.HTTP}
	if c.http == nil {
		c.http = &http.Client{Transport: &http.Transport{
			Proxy: http.ProxyFromEnvironment, MaxIdleConnsPerHost: 4, IdleConnTimeout: 90 * time.Second,
			ResponseHeaderTimeout: cfg.Timeout,
		}}
	}
	return c, nil
}

// orderJSON is the internal order shape (DESIGN.md).
type orderJSON struct {
	ID          string  `json:"id"`
	Status      string  `json:"status"`
	PaymentID   *string `json:"payment_id"`
	AmountCents int64   `json:"amount_cents"`
	Currency    string  `json:"currency"`
	UpdatedAt   string  `json:"updated_at"`
}

func (o orderJSON) toOrder() (reconcile.Order, error) {
	if o.ID == "" || o.Status == "" {
		return reconcile.Order{}, fmt.Errorf("an order without id or status: %+v", o)
	}
	at, err := time.Parse(time.RFC3339Nano, o.UpdatedAt)
	if err != nil {
		return reconcile.Order{}, fmt.Errorf("order %s: updated_at %q: %w", o.ID, o.UpdatedAt, err)
	}
	out := reconcile.Order{ID: o.ID, Status: o.Status, AmountCents: o.AmountCents, Currency: o.Currency, UpdatedAt: at.UTC()}
	if o.PaymentID != nil {
		out.PaymentID = *o.PaymentID
	}
	return out, nil
}

func toOrders(in []orderJSON) ([]reconcile.Order, error) {
	out := make([]reconcile.Order, len(in))
	for i, o := range in {
		var err error
		if out[i], err = o.toOrder(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// BatchGet implements reconcile.Orders.
func (c *Client) BatchGet(ctx context.Context, ids []string) ([]reconcile.Order, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	if len(ids) > reconcile.MaxBatch {
		return nil, fmt.Errorf("orderclient: batch-get of %d ids (at most %d)", len(ids), reconcile.MaxBatch)
	}
	body, err := json.Marshal(map[string][]string{"ids": ids})
	if err != nil {
		return nil, err
	}
	var out struct {
		Orders []orderJSON `json:"orders"`
	}
	if err := c.call(ctx, http.MethodPost, "/internal/v1/orders/batch-get", body, &out); err != nil {
		return nil, err
	}
	return toOrders(out.Orders)
}

// ListPaid implements reconcile.Orders. The listing is half-open
// (updated_from ≤ updated_at < updated_to) and times carry microseconds, so
// `to` is sent as to + 1 µs to include it.
func (c *Client) ListPaid(ctx context.Context, from, to time.Time, cursor string, limit int) (reconcile.OrderPage, error) {
	q := url.Values{}
	q.Set("status", reconcile.OrderPaid)
	q.Set("updated_from", from.UTC().Format(time.RFC3339Nano))
	q.Set("updated_to", to.UTC().Add(time.Microsecond).Format(time.RFC3339Nano))
	q.Set("limit", fmt.Sprint(limit))
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	var out struct {
		Orders     []orderJSON `json:"orders"`
		NextCursor *string     `json:"next_cursor"`
	}
	if err := c.call(ctx, http.MethodGet, "/internal/v1/orders?"+q.Encode(), nil, &out); err != nil {
		return reconcile.OrderPage{}, err
	}
	orders, err := toOrders(out.Orders)
	if err != nil {
		return reconcile.OrderPage{}, err
	}
	p := reconcile.OrderPage{Orders: orders}
	if out.NextCursor != nil {
		p.NextCursor = *out.NextCursor
	}
	return p, nil
}

// call makes one logical call with bounded retries and decodes a 200 into
// out. The error names the route, the last answer and the attempts made.
func (c *Client) call(ctx context.Context, method, path string, body []byte, out any) error {
	route := method + " " + strings.SplitN(path, "?", 2)[0]
	for n := 1; ; n++ {
		retry, err := c.try(ctx, method, path, body, out)
		switch {
		case err == nil:
			return nil
		case !retry || n >= c.cfg.Attempts || ctx.Err() != nil:
			return fmt.Errorf("%s: %w (attempt %d of %d)", route, err, n, c.cfg.Attempts)
		}
		t := time.NewTimer(c.cfg.Backoff(n))
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%s: %w (attempt %d of %d)", route, err, n, c.cfg.Attempts)
		case <-t.C:
		}
	}
}

// try makes one attempt; retry says whether another may succeed.
func (c *Client) try(ctx context.Context, method, path string, body []byte, out any) (retry bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return false, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return true, err
	}
	defer resp.Body.Close()
	lr := io.LimitReader(resp.Body, maxBody)
	if resp.StatusCode != http.StatusOK {
		var p struct {
			Code string `json:"code"`
		}
		b, _ := io.ReadAll(io.LimitReader(lr, 4<<10))
		_ = json.Unmarshal(b, &p)
		err := fmt.Errorf("answered %s", resp.Status)
		if p.Code != "" {
			err = fmt.Errorf("answered %s (%s)", resp.Status, p.Code)
		}
		return resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500, err
	}
	dec := json.NewDecoder(lr)
	if err := dec.Decode(out); err != nil {
		return true, fmt.Errorf("undecodable answer: %w", err)
	}
	return false, nil
}
