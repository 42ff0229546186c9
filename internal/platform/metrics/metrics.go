// Package metrics builds the Prometheus registry of one service. Each service
// has its own registry (the demo runs two services in one process, and a
// shared default registry would mix their series and panic on duplicates).
//
// Every series is named onceonly_<area>_<what>[_total|_seconds], with labels
// of bounded cardinality only (job, outcome, tier, route template — never a
// user, order or request id).
package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Namespace prefixes every metric of this project.
const Namespace = "onceonly"

// NewRegistry returns a registry with the Go runtime and process collectors.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// Handler serves reg in the Prometheus exposition format.
func Handler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
}

// DurationBuckets suit calls from a millisecond to half a minute.
var DurationBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}
