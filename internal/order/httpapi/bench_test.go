package httpapi_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"net/http"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/onceonly/onceonly/internal/order"
	"github.com/onceonly/onceonly/internal/order/httpapi"
	"github.com/onceonly/onceonly/internal/order/store"
	"github.com/onceonly/onceonly/internal/platform/httpx"
	"github.com/onceonly/onceonly/internal/platform/ratelimit"
)

// benchClients is the number of concurrent clients (DESIGN.md's figure).
const benchClients = 32

// BenchmarkSubmit measures, in one run on one database and Redis:
//
//	full    POST /v1/orders with a pre-issued token: claim + insert + finish
//	naive   the same request through the same middleware (user, rate limit),
//	        validated and inserted with no idempotency at all — the baseline
//	replay  POST /v1/orders again with a finished token (Redis says done;
//	        the order is read back from the database)
//
// each with ops/s and p50/p99 latency. The "idempotency tax" is
// full ops/s ÷ naive ops/s. Run on real servers:
//
//	TEST_MYSQL_DSN='root:@tcp(127.0.0.1:3306)/' TEST_REDIS_ADDR=127.0.0.1:6379 \
//	  go test -run '^$' -bench . -benchtime 3s ./internal/order/...
func BenchmarkSubmit(b *testing.B) {
	e := newEnv(b, options{
		logger: func(testing.TB) *slog.Logger { return slog.New(slog.DiscardHandler) },
		routes: naiveRoute,
	})
	b.Run("full", func(b *testing.B) {
		keys := e.preIssue(b, b.N)
		var next atomic.Int64
		e.measure(b, func() bool {
			k := keys[next.Add(1)-1]
			return e.submit(k.user, k.token, body1).status == http.StatusCreated
		})
	})
	b.Run("naive", func(b *testing.B) {
		e.measure(b, func() bool {
			return e.do(http.MethodPost, "/bench/naive", "naive-user", body1).status == http.StatusCreated
		})
	})
	b.Run("replay", func(b *testing.B) {
		keys := e.preIssue(b, 256)
		for _, k := range keys {
			if r := e.submit(k.user, k.token, body1); r.status != http.StatusCreated {
				b.Fatalf("create: %v", r)
			}
		}
		var next atomic.Int64
		e.measure(b, func() bool {
			k := keys[int(next.Add(1))%len(keys)]
			return e.submit(k.user, k.token, body1).status == http.StatusOK
		})
	})
}

type issued struct{ user, token string }

// preIssue issues n tokens outside the timer, at most 100 per user (the cap
// on unused tokens).
func (e *env) preIssue(b *testing.B, n int) []issued {
	b.Helper()
	b.StopTimer()
	defer b.StartTimer()
	s := e.tokens()
	out := make([]issued, n)
	run := rand.Text()[:8]
	var wg sync.WaitGroup
	var failed atomic.Value
	for w := range benchClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += benchClients {
				user := fmt.Sprintf("bench-%s-%d", run, i/100)
				tok, err := s.Issue(context.Background(), user)
				if err != nil {
					failed.Store(err)
					return
				}
				out[i] = issued{user, tok.Value}
			}
		}()
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		b.Fatalf("issue: %v", err)
	}
	return out
}

// measure runs op b.N times from benchClients goroutines and reports
// throughput and latency percentiles. op reports whether the answer was the
// expected one; any other answer fails the benchmark.
func (e *env) measure(b *testing.B, op func() bool) {
	b.Helper()
	b.SetParallelism(max(1, benchClients/runtime.GOMAXPROCS(0)))
	var mu sync.Mutex
	var lat []time.Duration
	var bad atomic.Int64
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		var mine []time.Duration
		for pb.Next() {
			t0 := time.Now()
			if !op() {
				bad.Add(1)
			}
			mine = append(mine, time.Since(t0))
		}
		mu.Lock()
		lat = append(lat, mine...)
		mu.Unlock()
	})
	elapsed := time.Since(start)
	b.StopTimer()
	if n := bad.Load(); n > 0 {
		b.Fatalf("%d of %d requests got an unexpected answer", n, b.N)
	}
	slices.Sort(lat)
	pct := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "ops/s")
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}

// naiveRoute is the baseline: what a submit costs without any idempotency —
// same middleware, same validation, same insert and response, no token.
func naiveRoute(eng *gin.Engine, gdb *gorm.DB, rdb *redis.Client, prefix string) {
	st, err := store.New(gdb, nil)
	if err != nil {
		panic(err)
	}
	cfg := testConfig()
	lim, err := ratelimit.New(rdb, ratelimit.Config{UserRPS: cfg.RateUserRPS, UserBurst: cfg.RateUserBurst,
		InstanceRPS: cfg.RateInstanceRPS, Instances: cfg.RateInstances, KeyPrefix: prefix + "naive:"})
	if err != nil {
		panic(err)
	}
	eng.POST("/bench/naive", httpx.RequireUser(), httpapi.RateLimit(lim), func(c *gin.Context) {
		u, _ := httpx.UserID(c)
		var body struct {
			Currency string `json:"currency"`
			Items    []struct {
				SKU        string `json:"sku"`
				Quantity   int64  `json:"quantity"`
				PriceCents int64  `json:"price_cents"`
			} `json:"items"`
		}
		if err := httpx.BindJSON(c, &body); err != nil {
			httpx.Error(c, err)
			return
		}
		in := order.NewOrder{Currency: body.Currency}
		for _, it := range body.Items {
			in.Items = append(in.Items, order.Item(it))
		}
		amount, err := in.Validate()
		if err != nil {
			httpx.Error(c, err)
			return
		}
		o := order.Order{UserID: u, Status: order.PendingPayment, AmountCents: amount, Currency: in.Currency,
			Items: in.Items, SubmitToken: "naive-" + rand.Text(), BodyHash: "-"}
		if err := st.Create(c.Request.Context(), &o); err != nil {
			httpx.Error(c, err)
			return
		}
		httpx.JSON(c, http.StatusCreated, gin.H{"id": order.FormatID(o.ID), "user_id": o.UserID, "status": o.Status,
			"amount_cents": o.AmountCents, "currency": o.Currency, "items": body.Items, "payment_id": nil,
			"version": o.Version, "created_at": o.CreatedAt, "updated_at": o.UpdatedAt})
	})
}
