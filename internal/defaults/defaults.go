// Package defaults is what a component's logger and metrics registerer stand for when its
// options leave them out: a logger that discards everything, and a registry of the component's
// own that nothing gathers. A component's constructor passes its options' values through it.
package defaults

import (
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
)

// Logger is l, or a logger that discards everything when l is nil.
func Logger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}

// Registerer is r, or a new registry of the caller's own when r is nil: the caller registers
// its metrics as always, and they are not exposed.
func Registerer(r prometheus.Registerer) prometheus.Registerer {
	if r == nil {
		return prometheus.NewRegistry()
	}
	return r
}
