package httpx

import (
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/onceonly/onceonly/internal/platform/metrics"
)

type httpMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// newHTTPMetrics registers the request series on reg. A nil reg keeps them
// unregistered (tests, tools). A registry that already has them (two engines
// of one service) gets the existing collectors back instead of a panic.
func newHTTPMetrics(reg prometheus.Registerer) *httpMetrics {
	m := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metrics.Namespace, Subsystem: "http", Name: "requests_total",
			Help: "HTTP requests answered, by method, route template and status.",
		}, []string{"method", "route", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: metrics.Namespace, Subsystem: "http", Name: "request_duration_seconds",
			Help:    "Time to answer an HTTP request, by method and route template.",
			Buckets: metrics.DurationBuckets,
		}, []string{"method", "route"}),
	}
	if reg != nil {
		m.requests = metrics.MustRegister(reg, m.requests)
		m.duration = metrics.MustRegister(reg, m.duration)
	}
	return m
}

// knownMethods bounds the method label: a client can send any token as a
// method, and each one would otherwise become a new series.
var knownMethods = map[string]bool{
	"GET": true, "HEAD": true, "POST": true, "PUT": true, "PATCH": true,
	"DELETE": true, "OPTIONS": true, "CONNECT": true, "TRACE": true,
}

// middleware observes from a deferred call so that panicking requests are
// counted, as the 500 they become.
func (m *httpMetrics) middleware() gin.HandlerFunc {
	return func(c *gin.Context) {
		start := time.Now()
		completed := false
		defer func() {
			method := c.Request.Method
			if !knownMethods[method] {
				method = "OTHER"
			}
			route := routeOf(c)
			m.requests.WithLabelValues(method, route, strconv.Itoa(finalStatus(c, completed))).Inc()
			m.duration.WithLabelValues(method, route).Observe(time.Since(start).Seconds())
		}()
		c.Next()
		completed = true
	}
}
