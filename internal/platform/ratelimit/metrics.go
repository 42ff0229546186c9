package ratelimit

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/onceonly/onceonly/internal/platform/metrics"
)

// limiterMetrics are created even without a Registerer, so the hot path never
// checks for nil. The per-tier children are resolved once: a label lookup per
// request would cost a map access and an allocation.
type limiterMetrics struct {
	decisions   map[string][2]prometheus.Counter // tier → {denied, allowed}
	limited     map[string]prometheus.Counter    // tier → denied
	fallback    prometheus.Gauge
	redisErrors map[bool]prometheus.Counter // timeout? → counter
	transitions *prometheus.CounterVec
}

var tiers = []string{TierInstance, TierUser, TierFallback}

func newMetrics(reg prometheus.Registerer) (*limiterMetrics, error) {
	ns, sub := metrics.Namespace, "ratelimit"
	decisions := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
		Name: "decisions_total", Help: "Rate-limit decisions by the tier that made them and outcome (allowed, denied)."},
		[]string{"tier", "outcome"})
	limited := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
		Name: "limited_total", Help: "Requests denied, by the tier that denied them."}, []string{"tier"})
	fallback := prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub,
		Name: "fallback_active", Help: "1 while per-user limits are decided locally because Redis is failing."})
	redisErrors := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
		Name: "redis_errors_total", Help: "Redis calls of the limiter that failed, by kind (timeout, error)."},
		[]string{"kind"})
	transitions := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
		Name: "breaker_transitions_total", Help: "Circuit breaker transitions, by the state entered."},
		[]string{"to"})

	m := &limiterMetrics{
		decisions:   map[string][2]prometheus.Counter{},
		limited:     map[string]prometheus.Counter{},
		fallback:    fallback,
		redisErrors: map[bool]prometheus.Counter{true: redisErrors.WithLabelValues("timeout"), false: redisErrors.WithLabelValues("error")},
		transitions: transitions,
	}
	// Every series exists from the start, so rate() and alerts see a zero
	// instead of a missing series before the first event.
	for _, t := range tiers {
		m.decisions[t] = [2]prometheus.Counter{decisions.WithLabelValues(t, "denied"), decisions.WithLabelValues(t, "allowed")}
		m.limited[t] = limited.WithLabelValues(t)
	}
	for _, s := range []breakerState{closed, open, halfOpen} {
		transitions.WithLabelValues(s.String())
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{decisions, limited, fallback, redisErrors, transitions} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("ratelimit: register metrics: %w", err)
		}
	}
	return m, nil
}

func (m *limiterMetrics) record(d Decision) {
	if d.Allowed {
		m.decisions[d.Tier][1].Inc()
		return
	}
	m.decisions[d.Tier][0].Inc()
	m.limited[d.Tier].Inc()
}

func (m *limiterMetrics) redisError(err error) {
	m.redisErrors[isTimeout(err)].Inc()
}

// isTimeout covers our own deadline (context.DeadlineExceeded has Timeout())
// and the client's socket timeouts (net.Error).
func isTimeout(err error) bool {
	var ne interface{ Timeout() bool }
	return errors.As(err, &ne) && ne.Timeout()
}
