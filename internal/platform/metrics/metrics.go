// Package metrics builds the Prometheus registry of one service. Each service
// has its own registry (the demo runs two services in one process, and a
// shared default registry would mix their series and panic on duplicates).
//
// Every series is named onceonly_<area>_<what>[_total|_seconds], with labels
// of bounded cardinality only (job, outcome, tier, route template — never a
// user, order or request id).
package metrics

import (
	"errors"
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

// Register adds c to reg (nil: nowhere) and returns the collector to use:
// when an identical collector is already registered there (a second Runner,
// Relay or Store of one service, as in tests) that one is shared instead of
// failing. A different collector under the same name is an error.
func Register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if reg == nil {
		return c, nil
	}
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing, nil
			}
		}
		return c, err
	}
	return c, nil
}

// MustRegister is Register for wiring code: a conflicting definition is a
// programming error and panics, like prometheus.MustRegister.
func MustRegister[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	c, err := Register(reg, c)
	if err != nil {
		panic(err)
	}
	return c
}
