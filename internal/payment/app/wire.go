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
	"github.com/onceonly/onceonly/internal/payment/store"
	"github.com/onceonly/onceonly/internal/platform/db"
	"github.com/onceonly/onceonly/internal/platform/lock"
	"github.com/onceonly/onceonly/internal/platform/outbox"
)

// RelayJob names the payment service's outbox relay in the lock (Redis key
// "onceonly:lock:payment-outbox-relay" and its job_fences row). It is
// service-specific because the demo's two services share one Redis.
const RelayJob = "payment-outbox-relay"

// relayStop bounds how long Close waits for the relay to finish its round.
const relayStop = 3 * time.Second

// Migrations is the payment service's schema: payments and callback
// records, the outbox, the lock's fencing rows, and the simulator's records.
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
	// Locker runs the fenced jobs (the relay; reconciliation later). Nil
	// without a relay.
	Locker *lock.Runner
	// Relay publishes the outbox; nil when Config.KafkaBrokers is empty
	// (tests that only look at the outbox table).
	Relay *outbox.Relay

	stopRelay context.CancelFunc
	relayDone chan struct{}
	closeOnce sync.Once
	log       *slog.Logger
}

// Mount builds the payment service on w, registers its routes on w.Engine
// and, when Config.KafkaBrokers is set, starts the outbox relay in the
// background (on a context of its own, so it keeps publishing the events of
// requests still draining at shutdown). Call Close after the HTTP server has
// stopped.
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

	// The relay first: the service wakes it after each commit.
	var notify func()
	if len(w.Config.KafkaBrokers) > 0 {
		locker, err := lock.New(lock.Config{Addrs: w.Config.LockRedisAddrs, Expiry: w.Config.LockExpiry, DB: w.DB,
			KeyPrefix: w.LockKeyPrefix, Logger: w.Log, Registerer: w.Registry})
		if err != nil {
			return nil, err
		}
		relay, err := outbox.NewRelay(outbox.RelayConfig{DB: w.DB, Brokers: w.Config.KafkaBrokers, Locker: locker,
			Job: RelayJob, PollInterval: w.Config.OutboxPollInterval, Retention: w.Config.OutboxRetention,
			Logger: w.Log, Registerer: w.Registry})
		if err != nil {
			locker.Close()
			return nil, err
		}
		m.Locker, m.Relay, notify = locker, relay, relay.Notify
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
	if err := httpapi.Routes(w.Engine, httpapi.Deps{Service: svc, InternalToken: w.Config.InternalToken}); err != nil {
		return nil, m.abort(err)
	}

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

	if m.Relay != nil {
		ctx, cancel := context.WithCancel(context.Background())
		m.stopRelay, m.relayDone = cancel, make(chan struct{})
		go func() {
			defer close(m.relayDone)
			if err := m.Relay.Run(ctx); err != nil {
				w.Log.Error("payment: outbox relay stopped", "err", err)
			}
		}()
	}
	return m, nil
}

// abort releases what Mount built before failing with err.
func (m *Mounted) abort(err error) error {
	if m.Locker != nil {
		m.Locker.Close()
	}
	return err
}

// Close stops the relay (waiting at most relayStop for its round to end),
// then closes the lock's Redis clients and the simulator's connections. Safe
// to call twice.
func (m *Mounted) Close() error {
	var errs []error
	m.closeOnce.Do(func() {
		if m.stopRelay != nil {
			m.stopRelay()
			select {
			case <-m.relayDone:
				errs = append(errs, m.Locker.Close())
			case <-time.After(relayStop):
				// Its lease expires on its own; the unpublished rows wait for
				// the next instance's relay.
				m.log.Warn("payment: outbox relay did not stop in time", "bound", relayStop)
			}
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
	if len(c.KafkaBrokers) > 0 {
		if len(c.LockRedisAddrs) == 0 {
			errs = append(errs, errors.New("config: LOCK_REDIS_ADDRS: at least one address is required"))
		}
		if c.LockExpiry < 100*time.Millisecond {
			errs = append(errs, fmt.Errorf("config: LOCK_EXPIRY: want at least 100ms, got %v", c.LockExpiry))
		}
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
