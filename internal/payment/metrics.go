package payment

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/onceonly/onceonly/internal/platform/metrics"
)

// Outcomes of POST /v1/payments, the values of
// onceonly_payment_creates_total{outcome}.
const (
	CreateNew         = "new"          // 201: the order's first payment
	CreateExisting    = "existing"     // 200: the order's live payment, again
	CreateNextAttempt = "next_attempt" // 201: a new attempt after a FAILED one
	CreateMismatch    = "mismatch"     // 409 payment_mismatch
	CreateAfterRefund = "after_refund" // 409 invalid_transition: the order's payment was refunded
)

// Results of POST /v1/payments/callback (and of reconciliation's gateway
// answers, which take the same path), the values of
// onceonly_payment_callbacks_total{result}.
const (
	ResultProcessed    = "processed"     // 200: this callback moved the payment
	ResultDuplicate    = "duplicate"     // 200: the payment already has this outcome
	ResultConflict     = "conflict"      // 200: contradicts the payment's outcome; recorded
	ResultBadSignature = "bad_signature" // 401: missing, malformed or not verifying
	ResultStale        = "stale"         // 401: genuine but outside the ±300 s window
	ResultMismatch     = "mismatch"      // 422: amount or currency differ; recorded
	ResultNotFound     = "not_found"     // 404: no such payment
	ResultInvalid      = "invalid"       // 400: verified but malformed
	ResultUnavailable  = "unavailable"   // 503: the database failed; nothing written
)

var (
	createOutcomes  = []string{CreateNew, CreateExisting, CreateNextAttempt, CreateMismatch, CreateAfterRefund}
	callbackResults = []string{ResultProcessed, ResultDuplicate, ResultConflict, ResultBadSignature,
		ResultStale, ResultMismatch, ResultNotFound, ResultInvalid, ResultUnavailable}
)

type serviceMetrics struct {
	creates   map[string]prometheus.Counter
	callbacks map[string]prometheus.Counter
}

func newServiceMetrics(reg prometheus.Registerer) (*serviceMetrics, error) {
	creates := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metrics.Namespace, Subsystem: "payment",
		Name: "creates_total", Help: "POST /v1/payments answers by outcome (new, existing, next_attempt, mismatch, after_refund)."},
		[]string{"outcome"})
	callbacks := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metrics.Namespace, Subsystem: "payment",
		Name: "callbacks_total", Help: "Gateway callbacks by result (processed, duplicate, conflict, bad_signature, stale, mismatch, not_found, invalid, unavailable)."},
		[]string{"result"})
	if reg != nil {
		var err error
		if creates, err = metrics.Register(reg, creates); err != nil {
			return nil, err
		}
		if callbacks, err = metrics.Register(reg, callbacks); err != nil {
			return nil, err
		}
	}
	// Every series exists from the start: an alert on a rate sees 0, not a
	// missing series.
	m := &serviceMetrics{creates: map[string]prometheus.Counter{}, callbacks: map[string]prometheus.Counter{}}
	for _, o := range createOutcomes {
		m.creates[o] = creates.WithLabelValues(o)
	}
	for _, r := range callbackResults {
		m.callbacks[r] = callbacks.WithLabelValues(r)
	}
	return m, nil
}
