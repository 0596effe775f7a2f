package metric

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Counters declares a counter vector: name, help and its labels, in order.
func Counters(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

// Register registers each collector with reg; with a nil reg it registers nothing. It goes on
// past a collector that fails, so the error it returns names every one that did.
func Register(reg prometheus.Registerer, cs ...prometheus.Collector) error {
	if reg == nil {
		return nil
	}
	var errs []error
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
