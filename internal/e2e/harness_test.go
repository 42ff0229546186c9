package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	orderapp "github.com/onceonly/onceonly/internal/order/app"
	paymentapp "github.com/onceonly/onceonly/internal/payment/app"
	"github.com/onceonly/onceonly/internal/payment/events"
	"github.com/onceonly/onceonly/internal/platform/config"
	"github.com/onceonly/onceonly/internal/platform/testkit"
)

const internalToken = "e2e-internal-token"

// system is both services running against this test's infrastructure.
type system struct {
	OrderURL, PaymentURL string
	OrderDSN, PaymentDSN string
	RedisAddr            string
	client               *http.Client
	t                    testing.TB
}

// startSystem runs both services until the test ends. extra overrides
// configuration variables (e.g. short timeouts).
func startSystem(t testing.TB, extra map[string]string) *system {
	t.Helper()
	return startSystemWith(t, extra, nil)
}

// startSystemWith runs before(s) once the infrastructure exists and before
// the services start (e.g. to hold one of their locks, or to route
// s.OrderDSN, s.PaymentDSN or s.RedisAddr through a testkit.Proxy: the
// services are configured with the fields as before leaves them).
func startSystemWith(t testing.TB, extra map[string]string, before func(*system)) *system {
	t.Helper()
	redisAddr := privateRedis(t)
	brokers := testkit.Kafka(t, events.Topic, events.DLQTopic)
	orderLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	paymentLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &system{
		OrderURL:   "http://" + orderLn.Addr().String(),
		PaymentURL: "http://" + paymentLn.Addr().String(),
		OrderDSN:   testkit.DSN(t),
		PaymentDSN: testkit.DSN(t),
		RedisAddr:  redisAddr,
		client:     &http.Client{Timeout: 60 * time.Second},
		t:          t,
	}
	if before != nil {
		before(s)
	}
	shared := map[string]string{
		"REDIS_ADDR":             s.RedisAddr,
		"KAFKA_BROKERS":          strings.Join(brokers, ","),
		"PAYMENT_SERVICE_URL":    s.PaymentURL,
		"ORDER_SERVICE_URL":      s.OrderURL,
		"PAYMENT_GATEWAY_SECRET": "e2e-secret",
		"INTERNAL_API_TOKEN":     internalToken,
		"RATE_LIMIT_USER_RPS":    "1000",
		"RATE_LIMIT_USER_BURST":  "2000",
	}
	for k, v := range extra {
		shared[k] = v
	}
	env := func(dsn string) *config.Env {
		m := map[string]string{"MYSQL_DSN": dsn}
		for k, v := range shared {
			m[k] = v
		}
		return config.FromMap(m)
	}
	orderCfg, err := orderapp.LoadConfig(env(s.OrderDSN))
	if err != nil {
		t.Fatal(err)
	}
	paymentCfg, err := paymentapp.LoadConfig(env(s.PaymentDSN))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		if err := orderapp.Run(ctx, orderCfg, orderapp.Deps{Log: testkit.Logger(t).With("service", "order"), Listener: orderLn}); err != nil {
			t.Errorf("order service: %v", err)
		}
	}()
	go func() {
		defer wg.Done()
		if err := paymentapp.Run(ctx, paymentCfg, paymentapp.Deps{Log: testkit.Logger(t).With("service", "payment"), Listener: paymentLn}); err != nil {
			t.Errorf("payment service: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
	testkit.WaitReady(t, s.OrderURL, 30*time.Second)
	testkit.WaitReady(t, s.PaymentURL, 30*time.Second)
	return s
}

// privateRedis gives the test a Redis of its own: the services' lock keys
// ("onceonly:lock:<job>") are the same in every test, so on a shared server
// parallel tests would contend for one another's jobs. A private redis-server
// when the tests run against real servers, a miniredis otherwise.
func privateRedis(t testing.TB) string {
	t.Helper()
	if os.Getenv("TEST_REDIS_ADDR") != "" {
		return testkit.RedisServer(t).Addr
	}
	rdb, _ := testkit.Redis(t)
	return rdb.Options().Addr
}

// do sends a JSON request and decodes a JSON answer into out (if non-nil).
func (s *system) do(method, url string, headers map[string]string, body any, out any) (int, http.Header) {
	s.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			s.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		s.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			s.t.Fatalf("%s %s: %d %s: %v", method, url, resp.StatusCode, raw, err)
		}
	}
	return resp.StatusCode, resp.Header
}

func user(u string) map[string]string { return map[string]string{"X-User-ID": u} }

func bearer() map[string]string { return map[string]string{"Authorization": "Bearer " + internalToken} }

// order is the part of the order JSON the tests read.
type order struct {
	ID          string  `json:"id"`
	Status      string  `json:"status"`
	AmountCents int64   `json:"amount_cents"`
	PaymentID   *string `json:"payment_id"`
	Version     int64   `json:"version"`
}

// placeOrder takes a token and submits one order for u.
func (s *system) placeOrder(u string, priceCents int64) order {
	s.t.Helper()
	var tok struct{ Token string }
	if code, _ := s.do("POST", s.OrderURL+"/v1/orders/tokens", user(u), nil, &tok); code != http.StatusCreated {
		s.t.Fatalf("token: %d", code)
	}
	h := user(u)
	h["Idempotency-Key"] = tok.Token
	var o order
	body := map[string]any{"currency": "CNY", "items": []map[string]any{{"sku": "sku-1", "quantity": 1, "price_cents": priceCents}}}
	if code, _ := s.do("POST", s.OrderURL+"/v1/orders", h, body, &o); code != http.StatusCreated {
		s.t.Fatalf("submit: %d", code)
	}
	return o
}

// waitOrder polls the order until cond holds or d passes.
func (s *system) waitOrder(u, id string, d time.Duration, cond func(order) bool) order {
	s.t.Helper()
	deadline := time.Now().Add(d)
	var o order
	for {
		s.do("GET", s.OrderURL+"/v1/orders/"+id, user(u), nil, &o)
		if cond(o) {
			return o
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("order %s: condition not met within %s; last %+v", id, d, o)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func must(t testing.TB, ok bool, format string, args ...any) {
	t.Helper()
	if !ok {
		t.Fatalf(format, args...)
	}
}

func realServers() bool { return os.Getenv("TEST_MYSQL_DSN") != "" }
