package idempotency

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/onceonly/onceonly/internal/platform/metrics"
)

// counters of one Store. Labels are bounded sets (outcome, op), never a user
// or token.
type counters struct {
	issued      prometheus.Counter
	refused     prometheus.Counter
	claims      *prometheus.CounterVec
	finishes    *prometheus.CounterVec
	releases    *prometheus.CounterVec
	redisErrors *prometheus.CounterVec
}

func newCounters(reg prometheus.Registerer) (*counters, error) {
	opts := func(name, help string) prometheus.CounterOpts {
		return prometheus.CounterOpts{Namespace: metrics.Namespace, Subsystem: "idempotency", Name: name, Help: help}
	}
	m := &counters{
		issued:  prometheus.NewCounter(opts("tokens_issued_total", "Submit tokens issued.")),
		refused: prometheus.NewCounter(opts("tokens_refused_total", "Token requests refused because the user holds MaxUnused unused tokens.")),
		claims: prometheus.NewCounterVec(opts("claims_total",
			"Claims by outcome; reclaimed = claimed after an earlier lease ran out (the unique index decides)."), []string{"outcome"}),
		finishes:    prometheus.NewCounterVec(opts("finishes_total", "Finish calls by outcome."), []string{"outcome"}),
		releases:    prometheus.NewCounterVec(opts("releases_total", "Release calls by outcome."), []string{"outcome"}),
		redisErrors: prometheus.NewCounterVec(opts("redis_errors_total", "Calls that failed on Redis (answered 503)."), []string{"op"}),
	}
	// Every series exists from the start, so a rate() over a rare outcome
	// (lease_lost, reclaimed) is 0 rather than absent.
	for _, o := range []string{"invalid", "claimed", "reclaimed", "in_use", "done", "reused"} {
		m.claims.WithLabelValues(o)
	}
	for _, o := range []string{"done", "lease_lost"} {
		m.finishes.WithLabelValues(o)
	}
	for _, o := range []string{"released", "lease_lost"} {
		m.releases.WithLabelValues(o)
	}
	for _, op := range []string{"issue", "claim", "finish", "release"} {
		m.redisErrors.WithLabelValues(op)
	}
	if reg == nil {
		return m, nil
	}
	var err error
	if m.issued, err = metrics.Register(reg, m.issued); err != nil {
		return nil, err
	}
	if m.refused, err = metrics.Register(reg, m.refused); err != nil {
		return nil, err
	}
	for _, v := range []**prometheus.CounterVec{&m.claims, &m.finishes, &m.releases, &m.redisErrors} {
		if *v, err = metrics.Register(reg, *v); err != nil {
			return nil, err
		}
	}
	return m, nil
}
