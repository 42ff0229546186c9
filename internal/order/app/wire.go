package app

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/onceonly/onceonly/internal/order"
	"github.com/onceonly/onceonly/internal/order/consumer"
	"github.com/onceonly/onceonly/internal/order/httpapi"
	"github.com/onceonly/onceonly/internal/order/paymentclient"
	"github.com/onceonly/onceonly/internal/order/store"
	"github.com/onceonly/onceonly/internal/platform/db"
	"github.com/onceonly/onceonly/internal/platform/idempotency"
	"github.com/onceonly/onceonly/internal/platform/lock"
	"github.com/onceonly/onceonly/internal/platform/ratelimit"
)

// DefaultKeyPrefix prefixes every Redis key the order service writes:
// "onceonly:idem:…" for submit tokens, "onceonly:rl:…" for rate limits.
const DefaultKeyPrefix = "onceonly:"

// Migrations is the order service's schema: orders, the consumer's
// consumed_events, and the fenced jobs' job_fences (in this database, so a
// job's fence check commits with its writes).
func Migrations() []db.Migration {
	return slices.Concat(store.Migrations(), consumer.Migrations(), lock.Migrations())
}

// Wiring is the infrastructure Mount builds the order API on: in Run the
// service's own (internal/platform/service), in tests a private database and
// Redis namespace.
type Wiring struct {
	Config Config
	// DB must be migrated with Migrations.
	DB *gorm.DB
	// Redis holds submit tokens and rate limits. The limiter gets a client of
	// its own to the same server (see limiterClient).
	Redis *redis.Client
	// Engine receives the routes (an httpx.NewEngine engine).
	Engine *gin.Engine
	// Registry receives the service's metrics.
	Registry prometheus.Registerer
	Log      *slog.Logger
	// KeyPrefix prefixes every Redis key; "" means DefaultKeyPrefix.
	KeyPrefix string
	// WrapStore, if set, wraps the order store (tests slow it down or break
	// it here); production leaves it nil.
	WrapStore func(order.Store) order.Store
	// Payments, if set, replaces the HTTP client to Config.PaymentServiceURL
	// (tests put a fake payment service here).
	Payments order.Payments
}

// Mount builds the order service on w and registers its routes on w.Engine.
// The returned close releases what Mount opened (the limiter's client); call
// it after the HTTP server has stopped.
func Mount(w Wiring) (close func() error, err error) {
	if w.DB == nil || w.Redis == nil || w.Engine == nil {
		return nil, errors.New("order: Mount needs DB, Redis and Engine")
	}
	if w.Log == nil {
		w.Log = slog.New(slog.DiscardHandler)
	}
	if w.KeyPrefix == "" {
		w.KeyPrefix = DefaultKeyPrefix
	}
	if err := checkConfig(w.Config); err != nil {
		return nil, err
	}

	// Storage and submit tokens.
	st, err := store.New(w.DB, w.Registry)
	if err != nil {
		return nil, err
	}
	var orders order.Store = st
	if w.WrapStore != nil {
		orders = w.WrapStore(orders)
	}
	tokens, err := idempotency.New(w.Redis, tokenConfig(w.Config, w.KeyPrefix), w.Registry)
	if err != nil {
		return nil, err
	}
	payments := w.Payments
	if payments == nil {
		if payments, err = paymentClient(w.Config); err != nil {
			return nil, err
		}
	}
	svc, err := order.NewService(orders, tokens, order.Config{
		Lease: w.Config.SubmitLease, Log: w.Log, Registerer: w.Registry, Payments: payments,
	})
	if err != nil {
		return nil, err
	}

	// Rate limiting, on a client that fails fast (see limiterClient).
	lrdb := limiterClient(w.Redis.Options())
	lim, err := ratelimit.New(lrdb, limiterConfig(w.Config, w.KeyPrefix, w.Registry))
	if err != nil {
		lrdb.Close()
		return nil, err
	}

	if err := httpapi.Routes(w.Engine, httpapi.Deps{Service: svc, Limiter: lim, InternalToken: w.Config.InternalToken}); err != nil {
		lrdb.Close()
		return nil, err
	}
	return lrdb.Close, nil
}

// paymentClient is the HTTP client to the payment service: 2 s per attempt,
// 3 attempts (POST /v1/payments is idempotent on the order id).
func paymentClient(c Config) (*paymentclient.Client, error) {
	return paymentclient.New(paymentclient.Config{BaseURL: c.PaymentServiceURL, Token: c.InternalToken})
}

func tokenConfig(c Config, prefix string) idempotency.Config {
	return idempotency.Config{
		TTL: c.TokenTTL, Lease: c.SubmitLease,
		MaxUnused: idempotency.DefaultMaxUnused, KeyPrefix: prefix + "idem:",
	}
}

func limiterConfig(c Config, prefix string, reg prometheus.Registerer) ratelimit.Config {
	return ratelimit.Config{
		UserRPS: c.RateUserRPS, UserBurst: c.RateUserBurst,
		InstanceRPS: c.RateInstanceRPS, Instances: c.RateInstances,
		KeyPrefix: prefix, Registerer: reg,
	}
}

// limiterClient is a client to the same Redis for the limiter alone, as its
// package asks: no command retries and one dial attempt, because a retry or
// a dial back-off (100 ms each by default) cannot fit in the limiter's 50 ms
// budget and would turn a refused connection into a timeout. The submit
// path keeps the service's client: there a retry is worth its wait.
func limiterClient(o *redis.Options) *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr: o.Addr, Username: o.Username, Password: o.Password, DB: o.DB, TLSConfig: o.TLSConfig,
		DialTimeout: o.DialTimeout, ReadTimeout: o.ReadTimeout, WriteTimeout: o.WriteTimeout,
		PoolSize: o.PoolSize, MaxRetries: -1, DialerRetries: 1,
	})
}

// checkConfig refuses what would only fail later, naming the variable.
func checkConfig(c Config) error {
	var errs []error
	if c.InternalToken == "" {
		errs = append(errs, errors.New("config: INTERNAL_API_TOKEN: required but not set"))
	} else if c.PaymentServiceURL != "" {
		if _, err := paymentClient(c); err != nil {
			errs = append(errs, err)
		}
	}
	if err := tokenConfig(c, DefaultKeyPrefix).Validate(); err != nil {
		errs = append(errs, err)
	}
	for _, v := range []struct {
		name string
		val  float64
	}{{"RATE_LIMIT_USER_RPS", c.RateUserRPS}, {"RATE_LIMIT_INSTANCE_RPS", c.RateInstanceRPS}} {
		if math.IsNaN(v.val) || math.IsInf(v.val, 0) || v.val <= 0 {
			errs = append(errs, fmt.Errorf("config: %s: want a positive rate, got %v", v.name, v.val))
		}
	}
	return errors.Join(errs...)
}

// checkBackgroundConfig refuses what the consumer and the closer could only
// fail on later, naming the variable.
func checkBackgroundConfig(c Config) error {
	var errs []error
	if len(c.KafkaBrokers) == 0 {
		errs = append(errs, errors.New("config: KAFKA_BROKERS: required but not set"))
	}
	if len(c.LockRedisAddrs) == 0 {
		errs = append(errs, errors.New("config: LOCK_REDIS_ADDRS: required but not set"))
	}
	for _, v := range []struct {
		name     string
		val, min time.Duration
	}{{"ORDER_PAYMENT_TIMEOUT", c.PaymentTimeout, time.Second}, {"ORDER_TIMEOUT_INTERVAL", c.TimeoutInterval, 100 * time.Millisecond},
		{"LOCK_EXPIRY", c.LockExpiry, 500 * time.Millisecond}} {
		if v.val < v.min {
			errs = append(errs, fmt.Errorf("config: %s: want at least %v, got %v", v.name, v.min, v.val))
		}
	}
	return errors.Join(errs...)
}
