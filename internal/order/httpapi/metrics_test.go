package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
)

// metric returns the sum of the series name{label="value",...} (every
// series of name when label is "").
func (e *env) metric(name, label, value string) float64 {
	e.t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		e.t.Fatal(err)
	}
	sum, found := 0.0, false
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			match := label == ""
			for _, l := range m.GetLabel() {
				match = match || l.GetName() == label && l.GetValue() == value
			}
			if !match {
				continue
			}
			found = true
			if c := m.GetCounter(); c != nil {
				sum += c.GetValue()
			} else {
				sum += m.GetGauge().GetValue()
			}
		}
	}
	if !found {
		e.t.Fatalf("no series %s{%s=%q}", name, label, value)
	}
	return sum
}

func TestMetrics_CountTokensSubmitOutcomesConflictsAndLimits(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	key := e.token("alice")
	e.submit("alice", key, body1)                           // created
	e.submit("alice", key, body1)                           // replayed
	e.submit("alice", key, body2)                           // reused
	e.submit("alice", "", body1)                            // invalid (missing)
	e.submit("alice", strings.Repeat("Z", 26), body1)       // invalid (unknown)
	e.submit("alice", e.token("alice"), `{"currency":"x"}`) // bad_request
	e.submit("alice", e.token("alice"), `{`)                // bad_request (JSON)
	o := e.create("alice", body1)                           // created
	e.do(http.MethodPost, "/v1/orders/"+o.ID+"/cancel", "alice", "")
	e.do(http.MethodPost, "/v1/orders/"+o.ID+"/cancel", "alice", "") // CAS conflict

	for outcome, want := range map[string]float64{"created": 2, "replayed": 1, "reused": 1, "invalid": 2, "bad_request": 2,
		"in_use": 0, "unavailable": 0, "error": 0} {
		if got := e.metric("onceonly_order_submits_total", "outcome", outcome); got != want {
			t.Errorf("submits_total{outcome=%s} = %v, want %v", outcome, got, want)
		}
	}
	if got := e.metric("onceonly_idempotency_tokens_issued_total", "", ""); got != 4 {
		t.Errorf("tokens_issued_total = %v, want 4", got)
	}
	if got := e.metric("onceonly_order_cas_conflicts_total", "to", "CANCELLED"); got != 1 {
		t.Errorf("cas_conflicts_total{to=CANCELLED} = %v, want 1", got)
	}
	// The limiter's own series are on the service's registry; every /v1/
	// request above was decided by some tier.
	e.metric("onceonly_ratelimit_fallback_active", "", "")
	if got := e.metric("onceonly_ratelimit_decisions_total", "", ""); got < 14 {
		t.Errorf("%v rate-limit decisions recorded, want one per /v1/ request (14)", got)
	}
}
