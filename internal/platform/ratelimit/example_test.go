package ratelimit_test

import (
	"net/http"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/onceonly/onceonly/internal/platform/config"
	"github.com/onceonly/onceonly/internal/platform/metrics"
	"github.com/onceonly/onceonly/internal/platform/ratelimit"
)

// A middleware: 429 with Retry-After above the limit. (Compiled, not run: it
// needs a Redis.)
func ExampleLimiter_Allow() {
	env := config.FromOS()
	cfg := ratelimit.ConfigFromEnv(env)
	if err := env.Err(); err != nil {
		panic(err) // a service stops start-up with this message
	}
	cfg.Registerer = metrics.NewRegistry()
	// No retries: a retry cannot fit in the limiter's 50 ms budget.
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", MaxRetries: -1, DialerRetries: 1})
	lim, err := ratelimit.New(rdb, cfg)
	if err != nil {
		panic(err)
	}
	limit := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			d := lim.Allow(r.Context(), r.Header.Get("X-User-ID"))
			if !d.Allowed {
				w.Header().Set("Retry-After", strconv.Itoa(d.RetryAfterSeconds()))
				http.Error(w, "rate_limited", http.StatusTooManyRequests)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	_ = limit
}
