package defaults

import (
	"context"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestLogger(t *testing.T) {
	given := slog.New(slog.DiscardHandler)
	if Logger(given) != given {
		t.Error("Logger replaced the logger it was given")
	}
	l := Logger(nil)
	if l == nil {
		t.Fatal("Logger(nil) is nil")
	}
	if l.Enabled(context.Background(), slog.LevelError) {
		t.Error("Logger(nil) logs: want one that discards everything")
	}
}

func TestRegisterer(t *testing.T) {
	given := prometheus.NewRegistry()
	if Registerer(given) != prometheus.Registerer(given) {
		t.Error("Registerer replaced the registerer it was given")
	}
	a, b := Registerer(nil), Registerer(nil)
	if a == nil || b == nil {
		t.Fatal("Registerer(nil) is nil")
	}
	// Each caller gets its own: two components built without one register the same metric
	// names without a conflict.
	for _, r := range []prometheus.Registerer{a, b} {
		if err := r.Register(prometheus.NewCounter(prometheus.CounterOpts{Name: "same_name_total", Help: "h"})); err != nil {
			t.Errorf("register in a default registry: %v", err)
		}
	}
}
