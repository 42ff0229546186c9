package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/onceonly/onceonly/internal/order"
	"github.com/onceonly/onceonly/internal/order/app"
	"github.com/onceonly/onceonly/internal/platform/httpx"
	"github.com/onceonly/onceonly/internal/platform/idempotency"
	"github.com/onceonly/onceonly/internal/platform/testkit"
)

const internalToken = "test-internal-token"

// realRedis reports whether the tests run against a real Redis (CI).
func realRedis() bool { return os.Getenv("TEST_REDIS_ADDR") != "" }

// testConfig is the service's configuration with limits high enough that
// only the rate-limit tests meet them.
func testConfig() app.Config {
	return app.Config{
		InternalToken: internalToken,
		// Nothing listens there: the /pay tests hand in a fake instead.
		PaymentServiceURL: "http://127.0.0.1:1",
		TokenTTL:          30 * time.Minute,
		SubmitLease:       30 * time.Second,
		RateUserRPS:       1e5, RateUserBurst: 100_000,
		RateInstanceRPS: 1e6, RateInstances: 1,
	}
}

type options struct {
	cfg     func(*app.Config)
	maxOpen int                                                                 // DB pool; default 40 (MariaDB's 151 connections are shared)
	wrap    func(order.Store) order.Store                                       // fault injection
	redis   *redis.Client                                                       // instead of testkit.Redis (a private server)
	prefix  string                                                              // Redis key prefix with redis; default "onceonly:"
	db      *gorm.DB                                                            // a migrated database shared with another process, instead of testkit.DB
	logger  func(t testing.TB) *slog.Logger                                     // default: warnings and errors into the test log
	routes  func(e *gin.Engine, gdb *gorm.DB, rdb *redis.Client, prefix string) // more routes, added before serving
}

// env is the order service built exactly as app.Run builds it (app.Mount on
// an httpx engine), on the test's own database and Redis namespace, served
// by a real HTTP server.
type env struct {
	t       testing.TB
	handler http.Handler
	url     string
	db      *gorm.DB
	rdb     *redis.Client
	prefix  string
	cfg     app.Config
	reg     *prometheus.Registry
	client  *http.Client
}

func newEnv(t testing.TB, o options) *env {
	t.Helper()
	if o.maxOpen == 0 {
		o.maxOpen = 40
	}
	cfg := testConfig()
	if o.cfg != nil {
		o.cfg(&cfg)
	}
	gdb := o.db
	if gdb == nil {
		gdb = testkit.DB(t, o.maxOpen, app.Migrations()...)
	}
	rdb, prefix := o.redis, "onceonly:"
	if o.prefix != "" {
		prefix = o.prefix
	}
	if rdb == nil {
		rdb, prefix = testkit.Redis(t)
	}
	log := warnLogger(t)
	if o.logger != nil {
		log = o.logger(t)
	}
	reg := prometheus.NewRegistry()
	engine := httpx.NewEngine(httpx.Options{Logger: log, Registerer: reg})
	closeAPI, err := app.Mount(app.Wiring{
		Config: cfg, DB: gdb, Redis: rdb, Engine: engine, Registry: reg, Log: log,
		KeyPrefix: prefix, WrapStore: o.wrap,
	})
	if err != nil {
		t.Fatalf("Mount: %v", err)
	}
	if o.routes != nil {
		o.routes(engine, gdb, rdb, prefix)
	}
	srv := httptest.NewServer(engine)
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		MaxIdleConns: 1024, MaxIdleConnsPerHost: 1024, IdleConnTimeout: 10 * time.Second,
	}}
	t.Cleanup(func() {
		client.CloseIdleConnections()
		srv.Close()
		_ = closeAPI()
	})
	return &env{t: t, handler: engine, url: srv.URL, db: gdb, rdb: rdb, prefix: prefix, cfg: cfg, reg: reg, client: client}
}

// warnLogger sends WARN and above to the test log: the access log of a
// thousand requests would drown the one line that explains a failure.
func warnLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

type resp struct {
	status int
	header http.Header
	body   []byte
}

func (r resp) String() string { return http.StatusText(r.status) + " " + string(r.body) }

// do sends one request; headers are name, value pairs. It never fails the
// test (it may run in many goroutines): a transport error is status 0.
func (e *env) do(method, path, user, body string, headers ...string) resp {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, e.url+path, rd)
	if err != nil {
		return resp{body: []byte(err.Error())}
	}
	if user != "" {
		req.Header.Set("X-User-ID", user)
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

func (e *env) submit(user, key, body string) resp {
	var h []string
	if key != "" {
		h = []string{"Idempotency-Key", key}
	}
	return e.do(http.MethodPost, "/v1/orders", user, body, h...)
}

func (e *env) token(user string) string {
	e.t.Helper()
	r := e.do(http.MethodPost, "/v1/orders/tokens", user, "")
	if r.status != http.StatusCreated {
		e.t.Fatalf("POST /v1/orders/tokens: %v", r)
	}
	var tok struct {
		Token     string `json:"token"`
		ExpiresAt string `json:"expires_at"`
	}
	mustJSON(e.t, r.body, &tok)
	return tok.Token
}

// create submits body with a fresh token and returns the order.
func (e *env) create(user, body string) orderJSON {
	e.t.Helper()
	r := e.submit(user, e.token(user), body)
	if r.status != http.StatusCreated {
		e.t.Fatalf("submit: %v", r)
	}
	return decodeOrder(e.t, r)
}

// tokens returns a submit-token store on the service's Redis namespace, for
// tests that act as another process would (a claim whose process dies).
func (e *env) tokens() *idempotency.Store {
	e.t.Helper()
	s, err := idempotency.New(e.rdb, idempotency.Config{TTL: e.cfg.TokenTTL, Lease: e.cfg.SubmitLease,
		KeyPrefix: e.prefix + "idem:"}, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

func (e *env) countOrders(where string, args ...any) int64 {
	e.t.Helper()
	var n int64
	q := e.db.Table("orders")
	if where != "" {
		q = q.Where(where, args...)
	}
	if err := q.Count(&n).Error; err != nil {
		e.t.Fatal(err)
	}
	return n
}

type orderJSON struct {
	ID          string  `json:"id"`
	UserID      string  `json:"user_id"`
	Status      string  `json:"status"`
	AmountCents int64   `json:"amount_cents"`
	Currency    string  `json:"currency"`
	PaymentID   *string `json:"payment_id"`
	Version     int64   `json:"version"`
	CreatedAt   string  `json:"created_at"`
	UpdatedAt   string  `json:"updated_at"`
	Items       []struct {
		SKU        string `json:"sku"`
		Quantity   int64  `json:"quantity"`
		PriceCents int64  `json:"price_cents"`
	} `json:"items"`
}

func decodeOrder(t testing.TB, r resp) orderJSON {
	t.Helper()
	var o orderJSON
	mustJSON(t, r.body, &o)
	if o.ID == "" {
		t.Fatalf("no order in %v", r)
	}
	return o
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

// mustProblem checks r is a problem+json with status and code, and returns it.
func mustProblem(t testing.TB, r resp, status int, code string) problem {
	t.Helper()
	var p problem
	if r.status != status || !strings.HasPrefix(r.header.Get("Content-Type"), httpx.ProblemContentType) {
		t.Fatalf("got %d %s (%s), want %d %s", r.status, r.body, r.header.Get("Content-Type"), status, code)
	}
	if err := json.Unmarshal(r.body, &p); err != nil || p.Code != code || p.Status != status {
		t.Fatalf("problem %s (err %v), want code %s status %d", r.body, err, code, status)
	}
	return p
}

// race runs f(0..n-1) in n goroutines released together by one barrier, so
// the calls really overlap.
func race(n int, f func(i int)) {
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	ready.Add(n)
	done.Add(n)
	for i := range n {
		go func() {
			defer done.Done()
			ready.Done()
			<-start
			f(i)
		}()
	}
	ready.Wait()
	close(start)
	done.Wait()
}

const body1 = `{"currency":"CNY","items":[{"sku":"apple","quantity":2,"price_cents":350}]}`
const body2 = `{"currency":"CNY","items":[{"sku":"apple","quantity":3,"price_cents":350}]}`
