package app

import (
	"fmt"
	"time"

	"github.com/onceonly/onceonly/internal/platform/config"
)

// Config is the payment service's configuration (DESIGN.md, "Configuration").
type Config struct {
	HTTPAddr        string   // PAYMENT_HTTP_ADDR
	MySQLDSN        string   // MYSQL_DSN (a SQLite file in the demo)
	RedisAddr       string   // REDIS_ADDR
	KafkaBrokers    []string // KAFKA_BROKERS
	OrderServiceURL string   // ORDER_SERVICE_URL
	InternalToken   string   // INTERNAL_API_TOKEN
	// GatewaySecrets verify callbacks: the first signs, any verifies (rotation).
	GatewaySecrets []string // PAYMENT_GATEWAY_SECRET
	Gateway        string   // PAYMENT_GATEWAY

	ReconcileInterval time.Duration // RECONCILE_INTERVAL
	ReconcileWindow   time.Duration // RECONCILE_WINDOW
	ReconcileGrace    time.Duration // RECONCILE_GRACE
	ReconcileTimeout  time.Duration // RECONCILE_TIMEOUT

	LockExpiry     time.Duration // LOCK_EXPIRY
	LockRedisAddrs []string      // LOCK_REDIS_ADDRS (default: REDIS_ADDR)

	OutboxPollInterval time.Duration // OUTBOX_POLL_INTERVAL
	OutboxRetention    time.Duration // OUTBOX_RETENTION
}

// LoadConfig reads the configuration; the error names the first missing or
// malformed variable.
func LoadConfig(e *config.Env) (Config, error) {
	c := Config{
		HTTPAddr:        e.String("PAYMENT_HTTP_ADDR", ":8081"),
		MySQLDSN:        e.Required("MYSQL_DSN"),
		RedisAddr:       e.Required("REDIS_ADDR"),
		KafkaBrokers:    e.RequiredList("KAFKA_BROKERS"),
		OrderServiceURL: e.Required("ORDER_SERVICE_URL"),
		GatewaySecrets:  e.RequiredList("PAYMENT_GATEWAY_SECRET"),
		InternalToken:   e.Required("INTERNAL_API_TOKEN"),
		Gateway:         e.String("PAYMENT_GATEWAY", "simulator"),

		ReconcileInterval: e.Duration("RECONCILE_INTERVAL", 5*time.Minute),
		ReconcileWindow:   e.Duration("RECONCILE_WINDOW", 24*time.Hour),
		ReconcileGrace:    e.Duration("RECONCILE_GRACE", 30*time.Second),
		ReconcileTimeout:  e.Duration("RECONCILE_TIMEOUT", 2*time.Minute),

		LockExpiry: e.Duration("LOCK_EXPIRY", 10*time.Second),

		OutboxPollInterval: e.Duration("OUTBOX_POLL_INTERVAL", time.Second),
		OutboxRetention:    e.Duration("OUTBOX_RETENTION", 168*time.Hour),
	}
	c.LockRedisAddrs = e.List("LOCK_REDIS_ADDRS", []string{c.RedisAddr})
	if err := e.Err(); err != nil {
		return c, err
	}
	if c.Gateway != "simulator" {
		return c, fmt.Errorf("config: PAYMENT_GATEWAY: unknown gateway %q (known: simulator)", c.Gateway)
	}
	return c, nil
}
