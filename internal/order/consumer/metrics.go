package consumer

import (
	"github.com/prometheus/client_golang/prometheus"

	pm "github.com/onceonly/onceonly/internal/platform/metrics"
)

// metrics are the consumer's own series. Retries, handler errors and the lag
// per partition are the Runner's (onceonly_kafka_handler_retries_total,
// onceonly_kafka_consumer_lag{group="order-service"}), dead letters also
// onceonly_kafka_dead_letters_total.
type metrics struct {
	consumed     map[string]prometheus.Counter
	batchSeconds prometheus.Observer
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	consumed := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: pm.Namespace, Subsystem: "order", Name: "events_consumed_total",
		Help: "Payment events consumed and committed, by outcome (applied, recorded, late, duplicate, dead_lettered).",
	}, []string{"outcome"})
	batch := prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: pm.Namespace, Subsystem: "order", Name: "consume_batch_seconds",
		Help: "Duration of a committed consumer batch transaction.", Buckets: pm.DurationBuckets,
	})
	var err error
	if consumed, err = pm.Register(reg, consumed); err != nil {
		return nil, err
	}
	if batch, err = pm.Register(reg, batch); err != nil {
		return nil, err
	}
	m := &metrics{consumed: map[string]prometheus.Counter{}, batchSeconds: batch}
	// Every series exists from the start, so a rate() alert sees 0, not nothing.
	for _, o := range outcomes {
		m.consumed[o] = consumed.WithLabelValues(o)
	}
	return m, nil
}
