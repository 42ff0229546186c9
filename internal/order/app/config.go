package app

import (
	"time"

	"github.com/onceonly/onceonly/internal/platform/config"
)

// Config is the order service's configuration (DESIGN.md, "Configuration").
type Config struct {
	HTTPAddr          string   // ORDER_HTTP_ADDR
	MySQLDSN          string   // MYSQL_DSN (a SQLite file in the demo)
	RedisAddr         string   // REDIS_ADDR
	KafkaBrokers      []string // KAFKA_BROKERS
	PaymentServiceURL string   // PAYMENT_SERVICE_URL
	InternalToken     string   // INTERNAL_API_TOKEN

	TokenTTL        time.Duration // ORDER_TOKEN_TTL
	SubmitLease     time.Duration // ORDER_SUBMIT_LEASE
	PaymentTimeout  time.Duration // ORDER_PAYMENT_TIMEOUT
	TimeoutInterval time.Duration // ORDER_TIMEOUT_INTERVAL

	RateUserRPS     float64 // RATE_LIMIT_USER_RPS
	RateUserBurst   int     // RATE_LIMIT_USER_BURST
	RateInstanceRPS float64 // RATE_LIMIT_INSTANCE_RPS
	RateInstances   int     // RATE_LIMIT_INSTANCES

	LockExpiry     time.Duration // LOCK_EXPIRY
	LockRedisAddrs []string      // LOCK_REDIS_ADDRS (default: REDIS_ADDR)
}

// LoadConfig reads the configuration; the error names the first missing or
// malformed variable.
func LoadConfig(e *config.Env) (Config, error) {
	c := Config{
		HTTPAddr:          e.String("ORDER_HTTP_ADDR", ":8080"),
		MySQLDSN:          e.Required("MYSQL_DSN"),
		RedisAddr:         e.Required("REDIS_ADDR"),
		KafkaBrokers:      e.RequiredList("KAFKA_BROKERS"),
		PaymentServiceURL: e.Required("PAYMENT_SERVICE_URL"),
		InternalToken:     e.Required("INTERNAL_API_TOKEN"),

		TokenTTL:        e.Duration("ORDER_TOKEN_TTL", 30*time.Minute),
		SubmitLease:     e.Duration("ORDER_SUBMIT_LEASE", 30*time.Second),
		PaymentTimeout:  e.Duration("ORDER_PAYMENT_TIMEOUT", 15*time.Minute),
		TimeoutInterval: e.Duration("ORDER_TIMEOUT_INTERVAL", time.Minute),

		RateUserRPS:     e.Float("RATE_LIMIT_USER_RPS", 20),
		RateUserBurst:   e.Int("RATE_LIMIT_USER_BURST", 40, 1, 1_000_000),
		RateInstanceRPS: e.Float("RATE_LIMIT_INSTANCE_RPS", 2000),
		RateInstances:   e.Int("RATE_LIMIT_INSTANCES", 1, 1, 10_000),

		LockExpiry: e.Duration("LOCK_EXPIRY", 10*time.Second),
	}
	c.LockRedisAddrs = e.List("LOCK_REDIS_ADDRS", []string{c.RedisAddr})
	return c, e.Err()
}
