package order

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/onceonly/onceonly/internal/platform/apperr"
	"github.com/onceonly/onceonly/internal/platform/metrics"
)

// Submit outcomes, the values of onceonly_order_submits_total{outcome}.
const (
	OutcomeCreated     = "created"     // 201: this request inserted the order
	OutcomeReplayed    = "replayed"    // 200: the key's order, again
	OutcomeInUse       = "in_use"      // 409: another attempt holds the key
	OutcomeReused      = "reused"      // 422: the key was used with another body
	OutcomeInvalid     = "invalid"     // 400: key missing, unknown, expired or another user's
	OutcomeBadRequest  = "bad_request" // 400/413: the body was refused; the key is untouched
	OutcomeUnavailable = "unavailable" // 503: Redis or the database failed; nothing inserted
	OutcomeError       = "error"       // 500: a bug; see the log
)

var submitOutcomes = []string{OutcomeCreated, OutcomeReplayed, OutcomeInUse, OutcomeReused,
	OutcomeInvalid, OutcomeBadRequest, OutcomeUnavailable, OutcomeError}

// serviceMetrics are the service's own series. Tokens issued are counted by
// the token store itself (onceonly_idempotency_tokens_issued_total, on the
// same registry), CAS conflicts by the order store
// (onceonly_order_cas_conflicts_total).
type serviceMetrics struct {
	submits map[string]prometheus.Counter
}

func newServiceMetrics(reg prometheus.Registerer) (*serviceMetrics, error) {
	submits := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metrics.Namespace, Subsystem: "order",
		Name: "submits_total", Help: "Order submits (POST /v1/orders) by outcome."}, []string{"outcome"})
	m := &serviceMetrics{submits: map[string]prometheus.Counter{}}
	// Every series exists from the start: an alert on rate(...{outcome="error"})
	// sees 0, not a missing series.
	for _, o := range submitOutcomes {
		m.submits[o] = submits.WithLabelValues(o)
	}
	if reg != nil {
		if err := reg.Register(submits); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// submitOutcome names the answer a submit got from its result.
func submitOutcome(replayed bool, err error) string {
	if err == nil {
		if replayed {
			return OutcomeReplayed
		}
		return OutcomeCreated
	}
	var ae *apperr.Error
	if !errors.As(err, &ae) {
		return OutcomeError
	}
	switch ae.Code {
	case apperr.IdempotencyKeyInUse:
		return OutcomeInUse
	case apperr.IdempotencyKeyReused:
		return OutcomeReused
	case apperr.IdempotencyKeyMissing, apperr.IdempotencyKeyInvalid:
		return OutcomeInvalid
	case apperr.InvalidJSON, apperr.InvalidRequest, apperr.BodyTooLarge:
		return OutcomeBadRequest
	case apperr.DependencyUnavailable:
		return OutcomeUnavailable
	default:
		return OutcomeError
	}
}
