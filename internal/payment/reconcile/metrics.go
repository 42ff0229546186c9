package reconcile

import (
	"github.com/prometheus/client_golang/prometheus"

	pm "github.com/onceonly/onceonly/internal/platform/metrics"
)

// Repair kinds, the values of onceonly_reconcile_repairs_total{kind}.
const (
	RepairRepublished = "republished" // an outbox row made unpublished again
	RepairReinserted  = "reinserted"  // a pruned event rebuilt with its original id
	RepairApplied     = "applied"     // a gateway outcome applied through the callback path
	RepairRefunded    = "refunded"    // a refund made and recorded
)

var (
	allStatuses = []Status{Succeeded, Failed}
	allKinds    = []string{KindEventLost, KindStuckPending, KindPaidAfterCancel, KindOrderMissing,
		KindAmountMismatch, KindRefundedButPaid, KindPaidWithoutPayment, KindStateConflict}
	allRepairs = []string{RepairRepublished, RepairReinserted, RepairApplied, RepairRefunded}
)

// metrics are onceonly_reconcile_*: labels are the fixed sets above.
type metrics struct {
	runs        *prometheus.CounterVec // status
	checked     prometheus.Counter
	diffs       *prometheus.CounterVec // kind
	repairs     *prometheus.CounterVec // kind
	duration    prometheus.Histogram
	lastSuccess prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	opts := func(name, help string) prometheus.CounterOpts {
		return prometheus.CounterOpts{Namespace: pm.Namespace, Subsystem: "reconcile", Name: name, Help: help}
	}
	m := &metrics{
		runs:    prometheus.NewCounterVec(opts("runs_total", "Reconciliation runs by status (succeeded, failed)."), []string{"status"}),
		checked: prometheus.NewCounter(opts("items_checked_total", "Payments and PAID orders compared with the other side.")),
		diffs:   prometheus.NewCounterVec(opts("diffs_total", "Differences found, by kind."), []string{"kind"}),
		repairs: prometheus.NewCounterVec(opts("repairs_total",
			"Repairs made, by kind (republished, reinserted, applied, refunded)."), []string{"kind"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: pm.Namespace, Subsystem: "reconcile",
			Name: "duration_seconds", Help: "Duration of reconciliation runs, report write included.",
			Buckets: []float64{.01, .05, .1, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}}),
		lastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: pm.Namespace, Subsystem: "reconcile",
			Name: "last_success_timestamp_seconds", Help: "Unix time the last succeeded run finished (alert when it is old)."}),
	}
	if reg != nil {
		var err error
		if m.runs, err = pm.Register(reg, m.runs); err != nil {
			return nil, err
		}
		if m.checked, err = pm.Register(reg, m.checked); err != nil {
			return nil, err
		}
		if m.diffs, err = pm.Register(reg, m.diffs); err != nil {
			return nil, err
		}
		if m.repairs, err = pm.Register(reg, m.repairs); err != nil {
			return nil, err
		}
		if m.duration, err = pm.Register(reg, m.duration); err != nil {
			return nil, err
		}
		if m.lastSuccess, err = pm.Register(reg, m.lastSuccess); err != nil {
			return nil, err
		}
	}
	// Every series exists from the start: an alert on a rate sees 0.
	for _, s := range allStatuses {
		m.runs.WithLabelValues(string(s))
	}
	for _, k := range allKinds {
		m.diffs.WithLabelValues(k)
	}
	for _, k := range allRepairs {
		m.repairs.WithLabelValues(k)
	}
	return m, nil
}
