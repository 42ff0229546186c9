package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"

	"github.com/onceonly/onceonly/internal/payment"
	"github.com/onceonly/onceonly/internal/payment/gateway"
	"github.com/onceonly/onceonly/internal/payment/httpapi"
	"github.com/onceonly/onceonly/internal/payment/orderclient"
	"github.com/onceonly/onceonly/internal/payment/reconcile"
	"github.com/onceonly/onceonly/internal/payment/store"
	"github.com/onceonly/onceonly/internal/platform/db"
	"github.com/onceonly/onceonly/internal/platform/lock"
	"github.com/onceonly/onceonly/internal/platform/outbox"
)

// RelayJob names the payment service's outbox relay in the lock (Redis key
// "onceonly:lock:payment-outbox-relay" and its job_fences row). It is
// service-specific because the demo's two services share one Redis.
const RelayJob = "payment-outbox-relay"

// ReconcileJob names reconciliation in the lock: the schedule and POST
// /v1/reconciliations take this one lock (Redis key
// "onceonly:lock:payment-reconciliation" and its job_fences row).
const ReconcileJob = reconcile.DefaultJob

// backgroundStop bounds how long Close waits for the relay to finish its
// round and a scheduled reconciliation to write its report.
const backgroundStop = 3 * time.Second

// Migrations is the payment service's schema: payments, callback records and
// reconciliation reports, the outbox, the lock's fencing rows, and the
// simulator's records.
func Migrations() []db.Migration {
	var m []db.Migration
	m = append(m, store.Migrations()...)
	m = append(m, outbox.Migrations()...)
	m = append(m, lock.Migrations()...)
	m = append(m, gateway.Migrations()...)
	return m
}

// Wiring is the infrastructure Mount builds the payment service on: in Run
// the service's own (internal/platform/service), in tests a private database.
type Wiring struct {
	Config Config
	// DB must be migrated with Migrations.
	DB *gorm.DB
	// Engine receives the routes (an httpx.NewEngine engine).
	Engine *gin.Engine
	// Registry receives the service's metrics.
	Registry prometheus.Registerer
	Log      *slog.Logger
	// BaseURL is the service's own URL ("http://127.0.0.1:8081"): the
	// gateway simulator sends its callbacks to BaseURL/v1/payments/callback.
	BaseURL string
	// LockKeyPrefix prefixes the lock's Redis keys ("" means the lock
	// package's "onceonly:"); tests sharing a Redis give each its own.
	LockKeyPrefix string
	// Now is the clock of the callback's ±300 s window (nil: real time).
	Now func() time.Time
	// WrapStore, if set, wraps the payment store (tests inject faults here);
	// production leaves it nil.
	WrapStore func(payment.Store) payment.Store
}

// Mounted is a payment service built by Mount.
type Mounted struct {
	Service *payment.Service
	Store   *store.Store
	// Simulator is the gateway (the only adapter today).
	Simulator *gateway.Simulator
	// Gateway is what the service's jobs call (the Simulator, behind the
	// interface).
	Gateway payment.Gateway
	// Locker runs the fenced jobs (the relay, reconciliation). Nil when
	// Config.LockRedisAddrs is empty (tests that need neither).
	Locker *lock.Runner
	// Relay publishes the outbox; nil when Config.KafkaBrokers is empty
	// (tests that only look at the outbox table).
	Relay *outbox.Relay
	// Reconciler compares payments with orders (POST /v1/reconciliations,
	// and every ReconcileInterval); nil when Config.OrderServiceURL is empty.
	Reconciler *reconcile.Reconciler

	stop      context.CancelFunc
	running   sync.WaitGroup
	closeOnce sync.Once
	log       *slog.Logger
}

// Mount builds the payment service on w, registers its routes on w.Engine
// and starts its background work on a context of its own: the outbox relay
// when Config.KafkaBrokers is set (so it keeps publishing the events of
// requests still draining at shutdown), and scheduled reconciliation when
// Config.OrderServiceURL is set and Config.ReconcileInterval is positive
// (0, possible only in code, leaves reconciliation to POST
// /v1/reconciliations). Call Close after the HTTP server has stopped.
func Mount(w Wiring) (*Mounted, error) {
	if w.DB == nil || w.Engine == nil {
		return nil, errors.New("payment: Mount needs DB and Engine")
	}
	if w.Log == nil {
		w.Log = slog.New(slog.DiscardHandler)
	}
	if err := checkConfig(w.Config); err != nil {
		return nil, err
	}
	m := &Mounted{log: w.Log}

	// The lock, for every fenced job, then the relay: the service wakes it
	// after each commit.
	var notify func()
	if len(w.Config.LockRedisAddrs) > 0 {
		locker, err := lock.New(lock.Config{Addrs: w.Config.LockRedisAddrs, Expiry: w.Config.LockExpiry, DB: w.DB,
			KeyPrefix: w.LockKeyPrefix, Logger: w.Log, Registerer: w.Registry})
		if err != nil {
			return nil, err
		}
		m.Locker = locker
	}
	if len(w.Config.KafkaBrokers) > 0 {
		relay, err := outbox.NewRelay(outbox.RelayConfig{DB: w.DB, Brokers: w.Config.KafkaBrokers, Locker: m.Locker,
			Job: RelayJob, PollInterval: w.Config.OutboxPollInterval, Retention: w.Config.OutboxRetention,
			Logger: w.Log, Registerer: w.Registry})
		if err != nil {
			return nil, m.abort(err)
		}
		m.Relay, notify = relay, relay.Notify
	}

	// Storage and the business.
	st, err := store.New(w.DB, w.Registry)
	if err != nil {
		return nil, m.abort(err)
	}
	m.Store = st
	var payments payment.Store = st
	if w.WrapStore != nil {
		payments = w.WrapStore(payments)
	}
	svc, err := payment.NewService(payments, payment.Config{
		Secrets: w.Config.GatewaySecrets, Now: w.Now, Notify: notify, Log: w.Log, Registerer: w.Registry,
	})
	if err != nil {
		return nil, m.abort(err)
	}
	m.Service = svc

	// The gateway. The sandbox routes exist only with the simulator.
	switch w.Config.Gateway {
	case "simulator":
		if w.BaseURL == "" {
			return nil, m.abort(errors.New("payment: the gateway simulator needs the service's BaseURL"))
		}
		sim, err := gateway.NewSimulator(gateway.Config{DB: w.DB, Payments: svc, Secret: w.Config.GatewaySecrets[0],
			CallbackURL: strings.TrimSuffix(w.BaseURL, "/") + "/v1/payments/callback", Log: w.Log})
		if err != nil {
			return nil, m.abort(err)
		}
		sim.Routes(w.Engine)
		m.Simulator, m.Gateway = sim, sim
	default:
		return nil, m.abort(fmt.Errorf("config: PAYMENT_GATEWAY: unknown gateway %q (known: simulator)", w.Config.Gateway))
	}

	// Reconciliation: the order service's internal API, the gateway, the
	// callback path for queried outcomes, under the lock.
	if w.Config.OrderServiceURL != "" {
		orders, err := orderclient.New(orderclient.Config{BaseURL: w.Config.OrderServiceURL, Token: w.Config.InternalToken})
		if err != nil {
			return nil, m.abort(err)
		}
		rec, err := reconcile.New(reconcile.Config{
			Store: st, Orders: orders, Gateway: m.Gateway, Payments: svc, Locker: m.Locker, Job: ReconcileJob,
			Interval: w.Config.ReconcileInterval, Window: w.Config.ReconcileWindow, Grace: w.Config.ReconcileGrace,
			Timeout: w.Config.ReconcileTimeout, Notify: notify, Log: w.Log, Registerer: w.Registry,
		})
		if err != nil {
			return nil, m.abort(err)
		}
		m.Reconciler = rec
	}
	if err := httpapi.Routes(w.Engine, httpapi.Deps{Service: svc, InternalToken: w.Config.InternalToken,
		Reconciler: m.Reconciler}); err != nil {
		return nil, m.abort(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	m.stop = cancel
	if m.Relay != nil {
		m.background(func() {
			if err := m.Relay.Run(ctx); err != nil {
				w.Log.Error("payment: outbox relay stopped", "err", err)
			}
		})
	}
	if m.Reconciler != nil && w.Config.ReconcileInterval > 0 {
		m.background(func() {
			if err := m.Reconciler.Run(ctx); err != nil {
				w.Log.Error("payment: scheduled reconciliation stopped", "err", err)
			}
		})
	}
	return m, nil
}

func (m *Mounted) background(fn func()) {
	m.running.Add(1)
	go func() {
		defer m.running.Done()
		fn()
	}()
}

// abort releases what Mount built before failing with err.
func (m *Mounted) abort(err error) error {
	if m.Locker != nil {
		m.Locker.Close()
	}
	return err
}

// Close stops the relay and the reconciliation schedule, cancels a POST
// /v1/reconciliations still running (its report says so), waits at most
// backgroundStop for them, then closes the lock's Redis clients and the
// simulator's connections. Safe to call twice.
func (m *Mounted) Close() error {
	var errs []error
	m.closeOnce.Do(func() {
		if m.stop != nil {
			m.stop()
		}
		if m.Reconciler != nil {
			m.Reconciler.Close()
		}
		done := make(chan struct{})
		go func() { m.running.Wait(); close(done) }()
		select {
		case <-done:
			if m.Locker != nil {
				errs = append(errs, m.Locker.Close())
			}
		case <-time.After(backgroundStop):
			// Their leases expire on their own; unpublished rows and the
			// reconciliation wait for the next instance.
			m.log.Warn("payment: background jobs did not stop in time", "bound", backgroundStop)
		}
		if m.Simulator != nil {
			errs = append(errs, m.Simulator.Close())
		}
	})
	return errors.Join(errs...)
}

// checkConfig refuses what would only fail later, naming the variable.
func checkConfig(c Config) error {
	var errs []error
	if c.InternalToken == "" {
		errs = append(errs, errors.New("config: INTERNAL_API_TOKEN: required but not set"))
	}
	if len(c.GatewaySecrets) == 0 {
		errs = append(errs, errors.New("config: PAYMENT_GATEWAY_SECRET: at least one key is required"))
	}
	for i, s := range c.GatewaySecrets {
		if s == "" {
			errs = append(errs, fmt.Errorf("config: PAYMENT_GATEWAY_SECRET: key %d is empty", i+1))
		}
	}
	if c.Gateway != "simulator" {
		errs = append(errs, fmt.Errorf("config: PAYMENT_GATEWAY: unknown gateway %q (known: simulator)", c.Gateway))
	}
	if len(c.KafkaBrokers) > 0 || c.OrderServiceURL != "" {
		if len(c.LockRedisAddrs) == 0 {
			errs = append(errs, errors.New("config: LOCK_REDIS_ADDRS: at least one address is required"))
		}
		if c.LockExpiry < 500*time.Millisecond {
			errs = append(errs, fmt.Errorf("config: LOCK_EXPIRY: want at least 500ms, got %v", c.LockExpiry))
		}
	}
	if c.OrderServiceURL != "" {
		if c.ReconcileInterval < 0 {
			errs = append(errs, fmt.Errorf("config: RECONCILE_INTERVAL: want a positive duration, got %v", c.ReconcileInterval))
		}
		if c.ReconcileWindow <= 0 || c.ReconcileGrace <= 0 || c.ReconcileGrace >= c.ReconcileWindow {
			errs = append(errs, fmt.Errorf("config: RECONCILE_GRACE (%v) must be positive and below RECONCILE_WINDOW (%v)",
				c.ReconcileGrace, c.ReconcileWindow))
		}
		if c.ReconcileTimeout <= 0 {
			errs = append(errs, fmt.Errorf("config: RECONCILE_TIMEOUT: want a positive duration, got %v", c.ReconcileTimeout))
		}
	}
	if len(c.KafkaBrokers) > 0 {
		if c.OutboxPollInterval <= 0 {
			errs = append(errs, fmt.Errorf("config: OUTBOX_POLL_INTERVAL: want a positive duration, got %v", c.OutboxPollInterval))
		}
		if c.OutboxRetention <= 0 {
			errs = append(errs, fmt.Errorf("config: OUTBOX_RETENTION: want a positive duration, got %v", c.OutboxRetention))
		}
	}
	return errors.Join(errs...)
}

// BaseURL is the URL the service reaches itself at through ln: the
// listener's address, with 127.0.0.1 when it is bound to every interface
// (":8081" listens on the dual-stack wildcard, which IPv4 loopback reaches).
func BaseURL(ln net.Listener) string {
	addr, ok := ln.Addr().(*net.TCPAddr)
	if !ok {
		return "http://" + ln.Addr().String()
	}
	host := addr.IP.String()
	if addr.IP == nil || addr.IP.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, fmt.Sprint(addr.Port))
}
