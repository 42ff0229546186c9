package lock

import (
	"github.com/prometheus/client_golang/prometheus"

	pm "github.com/onceonly/onceonly/internal/platform/metrics"
)

// metrics are labelled by job only (and a small fixed outcome or stage), so
// their cardinality is the number of jobs.
type metrics struct {
	acquired  *prometheus.CounterVec   // job
	contended *prometheus.CounterVec   // job
	errors    *prometheus.CounterVec   // job, stage: acquire|token|release
	extends   *prometheus.CounterVec   // job, outcome: ok|failed
	lost      *prometheus.CounterVec   // job
	fenced    *prometheus.CounterVec   // job
	runs      *prometheus.CounterVec   // job, outcome: ok|error|lock_lost
	duration  *prometheus.HistogramVec // job
	acquire   *prometheus.HistogramVec // job
}

func newMetrics(reg prometheus.Registerer) *metrics {
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return pm.MustRegister(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: pm.Namespace, Subsystem: "lock", Name: name, Help: help,
		}, labels))
	}
	histogram := func(name, help string) *prometheus.HistogramVec {
		return pm.MustRegister(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: pm.Namespace, Subsystem: "lock", Name: name, Help: help, Buckets: pm.DurationBuckets,
		}, []string{"job"}))
	}
	return &metrics{
		acquired:  counter("acquisitions_total", "Ticks that acquired the job's lock and a fencing token.", "job"),
		contended: counter("contended_total", "Ticks skipped because another instance holds the job's lock.", "job"),
		errors: counter("errors_total",
			"Lock operations that failed: acquire (Redis unreachable or no quorum), token (database), release.", "job", "stage"),
		extends:  counter("extends_total", "Lease extensions by the watchdog, by outcome.", "job", "outcome"),
		lost:     counter("lost_total", "Runs whose lock was lost (extend failed, refused or late): the job's context was cancelled.", "job"),
		fenced:   counter("fenced_writes_total", "Fenced transactions refused because a newer holder had taken a token.", "job"),
		runs:     counter("job_runs_total", "Job runs under the lock, by outcome (ok, error, lock_lost).", "job", "outcome"),
		duration: histogram("job_duration_seconds", "Duration of job runs under the lock."),
		acquire:  histogram("acquire_seconds", "Time to acquire the lock and take a fencing token."),
	}
}
