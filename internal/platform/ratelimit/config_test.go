package ratelimit

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/onceonly/onceonly/internal/platform/config"
)

func TestNew_RejectsInvalidConfigNamingTheField(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { rdb.Close() })
	for name, tc := range map[string]struct {
		c     Config
		field string
	}{
		"negative rate":      {Config{UserRPS: -1}, "UserRPS"},
		"NaN rate":           {Config{UserRPS: math.NaN()}, "UserRPS"},
		"rate over 1e6":      {Config{UserRPS: 2e6}, "UserRPS"},
		"negative burst":     {Config{UserBurst: -1}, "UserBurst"},
		"negative instance":  {Config{InstanceRPS: -5}, "InstanceRPS"},
		"negative inst bur":  {Config{InstanceBurst: -1}, "InstanceBurst"},
		"negative instances": {Config{Instances: -2}, "Instances"},
		"negative timeout":   {Config{RedisTimeout: -time.Millisecond}, "RedisTimeout"},
		"negative threshold": {Config{FailureThreshold: -1}, "FailureThreshold"},
		"negative cool-down": {Config{CoolDown: -time.Second}, "CoolDown"},
		"negative lru":       {Config{FallbackUsers: -1}, "FallbackUsers"},
	} {
		_, err := New(rdb, tc.c)
		if err == nil || !strings.Contains(err.Error(), "Config."+tc.field+":") {
			t.Errorf("%s: err = %v, want one naming Config.%s", name, err, tc.field)
		}
	}
	if _, err := New(nil, Config{}); err == nil {
		t.Error("New(nil client) succeeded")
	}
}

func TestNew_ZeroConfigTakesTheDocumentedDefaults(t *testing.T) {
	t.Parallel()
	c, err := Config{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if c.UserRPS != 20 || c.UserBurst != 40 || c.InstanceRPS != 2000 || c.InstanceBurst != 2000 || c.Instances != 1 ||
		c.RedisTimeout != 50*time.Millisecond || c.FailureThreshold != 3 || c.CoolDown != time.Second ||
		c.FallbackUsers != 10000 || c.Now == nil {
		t.Fatalf("defaults %+v", c)
	}
}

func TestConfig_FallbackShareSplitsTheQuotaWithABurstOfAtLeastOne(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		rps              float64
		burst, instances int
		wantRPS          float64
		wantBurst        int
	}{
		{20, 40, 1, 20, 40},
		{20, 40, 4, 5, 10},
		{20, 40, 3, 20.0 / 3, 13}, // rounded down: never more than the total
		{1, 2, 10, 0.1, 1},        // at least 1, or a user could never pass
	} {
		c := Config{UserRPS: tc.rps, UserBurst: tc.burst, Instances: tc.instances}
		if c.shareRPS() != tc.wantRPS || c.shareBurst() != tc.wantBurst {
			t.Errorf("%+v: share %v/s burst %d, want %v/s burst %d", tc, c.shareRPS(), c.shareBurst(), tc.wantRPS, tc.wantBurst)
		}
	}
}

func TestConfigFromEnv_ReadsTheRateLimitVariables(t *testing.T) {
	t.Parallel()
	e := config.FromMap(map[string]string{"RATE_LIMIT_USER_RPS": "5", "RATE_LIMIT_USER_BURST": "7",
		"RATE_LIMIT_INSTANCE_RPS": "100", "RATE_LIMIT_INSTANCES": "3"})
	if c := ConfigFromEnv(e); e.Err() != nil || c.UserRPS != 5 || c.UserBurst != 7 || c.InstanceRPS != 100 || c.Instances != 3 {
		t.Fatalf("%+v, %v", c, e.Err())
	}
	e = config.FromMap(nil)
	if c := ConfigFromEnv(e); e.Err() != nil || c.UserRPS != 20 || c.UserBurst != 40 || c.InstanceRPS != 2000 || c.Instances != 1 {
		t.Fatalf("defaults: %+v, %v", c, e.Err())
	}
	e = config.FromMap(map[string]string{"RATE_LIMIT_INSTANCES": "0"})
	if ConfigFromEnv(e); e.Err() == nil || !strings.Contains(e.Err().Error(), "RATE_LIMIT_INSTANCES") {
		t.Fatalf("err = %v, want one naming RATE_LIMIT_INSTANCES", e.Err())
	}
}

func TestDecision_RetryAfterSecondsRoundsUpAndIsAtLeastOne(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		d    Decision
		want int
	}{
		{Decision{Allowed: true}, 0},
		{Decision{RetryAfter: 0}, 1},
		{Decision{RetryAfter: time.Millisecond}, 1},
		{Decision{RetryAfter: time.Second}, 1},
		{Decision{RetryAfter: time.Second + time.Nanosecond}, 2},
		{Decision{RetryAfter: 9500 * time.Millisecond}, 10},
	} {
		if got := tc.d.RetryAfterSeconds(); got != tc.want {
			t.Errorf("%+v: RetryAfterSeconds %d, want %d", tc.d, got, tc.want)
		}
	}
}

func TestNew_RegistersTheDocumentedMetrics(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { rdb.Close() })
	reg := prometheus.NewRegistry()
	if _, err := New(rdb, Config{Registerer: reg}); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, mf := range mfs {
		got[mf.GetName()] = true
	}
	for _, name := range []string{"onceonly_ratelimit_decisions_total", "onceonly_ratelimit_limited_total",
		"onceonly_ratelimit_fallback_active", "onceonly_ratelimit_redis_errors_total",
		"onceonly_ratelimit_breaker_transitions_total"} {
		if !got[name] {
			t.Errorf("metric %s not registered (have %v)", name, got)
		}
	}
	if _, err := New(rdb, Config{Registerer: reg}); err == nil {
		t.Error("a second limiter on the same registry registered silently")
	}
}
