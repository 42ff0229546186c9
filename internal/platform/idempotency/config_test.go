package idempotency

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/onceonly/onceonly/internal/platform/config"
)

func TestConfig_ZeroTakesDefaultsAndNonsenseIsRejected(t *testing.T) {
	t.Parallel()
	if err := (Config{}).withDefaults().Validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
	cases := []struct {
		name string
		cfg  Config
		want string
	}{
		{"negative TTL", Config{TTL: -time.Second}, "ORDER_TOKEN_TTL"},
		{"sub-millisecond lease", Config{Lease: time.Microsecond}, "ORDER_SUBMIT_LEASE"},
		{"lease outlives token", Config{TTL: time.Minute, Lease: time.Minute}, "shorter than TTL"},
		{"cap below one", Config{MaxUnused: -1}, "MaxUnused"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := New(nil, tc.cfg, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New(%+v) = %v, want an error naming %q", tc.cfg, err, tc.want)
			}
		})
	}
}

func TestConfigFromEnv_ReadsTheContractVariables(t *testing.T) {
	t.Parallel()
	env := config.FromMap(map[string]string{"ORDER_TOKEN_TTL": "10m", "ORDER_SUBMIT_LEASE": "5s"})
	cfg := ConfigFromEnv(env)
	if env.Err() != nil || cfg.TTL != 10*time.Minute || cfg.Lease != 5*time.Second || cfg.MaxUnused != 100 {
		t.Fatalf("ConfigFromEnv = %+v, %v", cfg, env.Err())
	}
	bad := config.FromMap(map[string]string{"ORDER_SUBMIT_LEASE": "soon"})
	ConfigFromEnv(bad)
	if bad.Err() == nil || !strings.Contains(bad.Err().Error(), "ORDER_SUBMIT_LEASE") {
		t.Fatalf("malformed ORDER_SUBMIT_LEASE: %v", bad.Err())
	}
}

func TestNew_SecondStoreOnOneRegistrySharesItsMetrics(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	a, err := New(nil, Config{}, reg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(nil, Config{}, reg)
	if err != nil {
		t.Fatalf("second New on one registry: %v", err)
	}
	if a.m.claims != b.m.claims {
		t.Fatal("second Store counts into its own, unregistered collectors")
	}
	n, err := reg.Gather()
	if err != nil || len(n) != 6 {
		t.Fatalf("gathered %d families (%v), want 6", len(n), err)
	}
}
