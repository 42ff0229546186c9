package kafka

import (
	"strconv"

	"github.com/IBM/sarama"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/onceonly/onceonly/internal/platform/metrics"
)

// runnerMetrics are the series of the consumer runner. Labels are bounded:
// group, topic and partition, never a key or offset.
type runnerMetrics struct {
	handled *prometheus.CounterVec // messages whose batch was committed
	retries *prometheus.CounterVec // handler calls that repeated a failed batch
	errors  *prometheus.CounterVec // handler calls that returned an error
	lag     *prometheus.GaugeVec   // messages after the last committed one
}

func newRunnerMetrics(reg prometheus.Registerer) *runnerMetrics {
	gt := []string{"group", "topic"}
	return &runnerMetrics{
		handled: metrics.MustRegister(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metrics.Namespace, Subsystem: "kafka", Name: "messages_handled_total",
			Help: "Messages handled successfully and committed by the consumer runner.",
		}, gt)),
		retries: metrics.MustRegister(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metrics.Namespace, Subsystem: "kafka", Name: "handler_retries_total",
			Help: "Handler calls that retried a batch after a failure (the batch is never skipped).",
		}, gt)),
		errors: metrics.MustRegister(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metrics.Namespace, Subsystem: "kafka", Name: "handler_errors_total",
			Help: "Handler calls that returned an error.",
		}, gt)),
		lag: metrics.MustRegister(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: metrics.Namespace, Subsystem: "kafka", Name: "consumer_lag",
			Help: "Messages in the partition after the last committed one (high-water mark - 1 - last committed offset).",
		}, []string{"group", "topic", "partition"})),
	}
}

// setLag records the lag of a claim whose next uncommitted offset is next.
func (m *runnerMetrics) setLag(group string, claim sarama.ConsumerGroupClaim, next int64) {
	lag := max(claim.HighWaterMarkOffset()-next, 0)
	m.lag.WithLabelValues(group, claim.Topic(), strconv.Itoa(int(claim.Partition()))).Set(float64(lag))
}

// dropLag removes a claim's series when the partition leaves this member, so
// a moved partition is not reported twice with a stale value.
func (m *runnerMetrics) dropLag(group string, claim sarama.ConsumerGroupClaim) {
	m.lag.DeleteLabelValues(group, claim.Topic(), strconv.Itoa(int(claim.Partition())))
}

func newDeadLetterMetric(reg prometheus.Registerer) *prometheus.CounterVec {
	return metrics.MustRegister(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metrics.Namespace, Subsystem: "kafka", Name: "dead_letters_total",
		Help: "Messages copied to a dead-letter topic, by source topic (the reason is in the copy's headers, not in a label).",
	}, []string{"topic"}))
}
