package app

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/onceonly/onceonly/internal/platform/config"
)

func validConfig(t *testing.T) Config {
	t.Helper()
	c, err := LoadConfig(config.FromMap(map[string]string{
		"MYSQL_DSN": "sqlite:x.db", "REDIS_ADDR": "127.0.0.1:1", "KAFKA_BROKERS": "127.0.0.1:2",
		"PAYMENT_SERVICE_URL": "http://127.0.0.1:3", "INTERNAL_API_TOKEN": "t",
	}))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A configuration that could only fail later (a lease longer than the
// token, a zero rate) stops start-up with the variable's name.
func TestCheckConfig_NamesTheVariable(t *testing.T) {
	t.Parallel()
	check := func(c Config) error { return errors.Join(checkConfig(c), checkBackgroundConfig(c)) }
	if err := check(validConfig(t)); err != nil {
		t.Fatalf("defaults refused: %v", err)
	}
	cases := []struct {
		name, want string
		mod        func(*Config)
	}{
		{"lease not shorter than the TTL", "ORDER_SUBMIT_LEASE", func(c *Config) { c.SubmitLease = c.TokenTTL }},
		{"tiny TTL", "ORDER_TOKEN_TTL", func(c *Config) { c.TokenTTL = time.Millisecond }},
		{"zero user rate", "RATE_LIMIT_USER_RPS", func(c *Config) { c.RateUserRPS = 0 }},
		{"negative instance rate", "RATE_LIMIT_INSTANCE_RPS", func(c *Config) { c.RateInstanceRPS = -1 }},
		{"no internal token", "INTERNAL_API_TOKEN", func(c *Config) { c.InternalToken = "" }},
		{"payment service URL without a scheme", "PAYMENT_SERVICE_URL", func(c *Config) { c.PaymentServiceURL = "payment:8081" }},
		{"zero payment timeout", "ORDER_PAYMENT_TIMEOUT", func(c *Config) { c.PaymentTimeout = 0 }},
		{"zero closer interval", "ORDER_TIMEOUT_INTERVAL", func(c *Config) { c.TimeoutInterval = 0 }},
		{"lock lease too short", "LOCK_EXPIRY", func(c *Config) { c.LockExpiry = 100 * time.Millisecond }},
	}
	for _, tc := range cases {
		c := validConfig(t)
		tc.mod(&c)
		if err := check(c); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %s", tc.name, err, tc.want)
		}
	}
}
