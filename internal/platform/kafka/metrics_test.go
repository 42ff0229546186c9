package kafka_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// metricSum adds up the values of the series of name whose labels include
// labels (nil: all series), and counts those series. A missing family is 0.
func metricSum(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	sum, _ := gather(t, reg, name, labels)
	return sum
}

// metricCount returns how many series name has.
func metricCount(t *testing.T, reg *prometheus.Registry, name string) int {
	t.Helper()
	_, n := gather(t, reg, name, nil)
	return n
}

func gather(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) (sum float64, n int) {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			matched := 0
			for _, l := range m.GetLabel() {
				if v, ok := labels[l.GetName()]; ok && v == l.GetValue() {
					matched++
				}
			}
			if matched != len(labels) {
				continue
			}
			n++
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue() // nil-safe getters
		}
	}
	return sum, n
}
