package httpapi_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"

	"github.com/onceonly/onceonly/internal/payment"
	"github.com/onceonly/onceonly/internal/payment/app"
	"github.com/onceonly/onceonly/internal/payment/events"
	"github.com/onceonly/onceonly/internal/platform/httpx"
	"github.com/onceonly/onceonly/internal/platform/testkit"
)

const (
	internalToken = "test-internal-token"
	currentKey    = "gateway-key-2025"
	previousKey   = "gateway-key-2024" // still configured: rotation in progress
	retiredKey    = "gateway-key-2023" // no longer configured
)

func testConfig() app.Config {
	return app.Config{
		InternalToken:      internalToken,
		GatewaySecrets:     []string{currentKey, previousKey},
		Gateway:            "simulator",
		LockExpiry:         2 * time.Second,
		OutboxPollInterval: 100 * time.Millisecond,
		OutboxRetention:    time.Hour,
		ReconcileWindow:    time.Hour,
		ReconcileGrace:     reconcileGrace,
		ReconcileTimeout:   30 * time.Second,
	}
}

type options struct {
	// relay runs the outbox relay to a private kfake cluster (lock on the
	// test's Redis).
	relay bool
	// gdb replaces the test's own database (fault tests put a proxy in front).
	gdb     *gorm.DB
	maxOpen int // DB pool; default 20 (MariaDB's 151 connections are shared)
	wrap    func(payment.Store) payment.Store
	logger  func(testing.TB) *slog.Logger
	// ordersURL turns reconciliation on against this order service (a
	// testkit.FakeOrders, or a proxy in front of one), with the lock on
	// the test's Redis.
	ordersURL string
	// schedule runs reconciliation every schedule (0: only on POST).
	schedule time.Duration
	// lockRedis and lockPrefix share the lock with another env (two
	// instances); "" takes the test's own Redis and prefix.
	lockRedis, lockPrefix string
}

// env is the payment service built exactly as app.Run builds it (app.Mount
// on an httpx engine) on the test's own database, served by a real HTTP
// server whose address the simulator calls back.
type env struct {
	t       testing.TB
	handler http.Handler
	url     string
	db      *gorm.DB
	m       *app.Mounted
	brokers []string
	reg     *prometheus.Registry
	client  *http.Client
	clock   atomic.Pointer[time.Time] // nil: real time
	// lockRedis and lockPrefix are the lock's Redis and key prefix (with
	// reconciliation or the relay).
	lockRedis, lockPrefix string
}

func newEnv(t testing.TB, o options) *env {
	t.Helper()
	if o.maxOpen == 0 {
		o.maxOpen = 20
	}
	cfg := testConfig()
	gdb := o.gdb
	if gdb == nil {
		gdb = testkit.DB(t, o.maxOpen, app.Migrations()...)
	}
	e := &env{t: t, db: gdb, reg: prometheus.NewRegistry()}
	lockPrefix := ""
	if o.relay || o.ordersURL != "" {
		rdb, prefix := testkit.Redis(t)
		cfg.LockRedisAddrs = []string{rdb.Options().Addr}
		lockPrefix = prefix
		if o.lockRedis != "" {
			cfg.LockRedisAddrs, lockPrefix = []string{o.lockRedis}, o.lockPrefix
		}
		e.lockRedis, e.lockPrefix = cfg.LockRedisAddrs[0], lockPrefix
	}
	if o.relay {
		e.brokers = testkit.Kafka(t, events.Topic, events.DLQTopic)
		cfg.KafkaBrokers = e.brokers
	}
	cfg.OrderServiceURL, cfg.ReconcileInterval = o.ordersURL, o.schedule
	log := warnLogger(t)
	if o.logger != nil {
		log = o.logger(t)
	}
	engine := httpx.NewEngine(httpx.Options{Logger: log, Registerer: e.reg})
	srv := httptest.NewUnstartedServer(engine)
	m, err := app.Mount(app.Wiring{
		Config: cfg, DB: gdb, Engine: engine, Registry: e.reg, Log: log,
		BaseURL: "http://" + srv.Listener.Addr().String(), LockKeyPrefix: lockPrefix,
		Now: e.now, WrapStore: o.wrap,
	})
	if err != nil {
		t.Fatalf("Mount: %v", err)
	}
	srv.Start()
	e.client = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		MaxIdleConns: 1100, MaxIdleConnsPerHost: 1100, IdleConnTimeout: 10 * time.Second,
	}}
	t.Cleanup(func() {
		e.client.CloseIdleConnections()
		srv.Close()
		_ = m.Close()
	})
	e.handler, e.url, e.m = engine, srv.URL, m
	return e
}

// now is the service's clock: the test's when set, else real time.
func (e *env) now() time.Time {
	if p := e.clock.Load(); p != nil {
		return *p
	}
	return time.Now().UTC().Truncate(time.Microsecond)
}

func (e *env) setClock(t time.Time) { e.clock.Store(&t) }

func warnLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// count runs SELECT COUNT(*) FROM table WHERE where.
func (e *env) count(table, where string, args ...any) int64 {
	e.t.Helper()
	var n int64
	q := e.db.Table(table)
	if where != "" {
		q = q.Where(where, args...)
	}
	if err := q.Count(&n).Error; err != nil {
		e.t.Fatal(err)
	}
	return n
}

// row is a payment as stored, read around the API.
type row struct {
	Status       string
	Version      int64
	GatewayTxnID *string
}

func (e *env) row(id string) row {
	e.t.Helper()
	var r row
	if err := e.db.Raw("SELECT status, version, gateway_txn_id FROM payments WHERE id = ?", id).Scan(&r).Error; err != nil {
		e.t.Fatal(err)
	}
	return r
}

// metric returns the value of counter name{label="value"} in the registry.
func (e *env) metric(name, label, value string) float64 {
	e.t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		e.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	e.t.Fatalf("no series %s{%s=%q}", name, label, value)
	return 0
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

// eventually polls cond every 20 ms until it holds or d passes.
func eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
