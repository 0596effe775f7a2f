package balancer

import (
	"testing"
	"time"
)

func TestFleetLimit(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	sec := time.Second
	tests := []struct {
		name string
		in   fleetInput
		want fleetDecision
	}{
		{name: "one instance, no report: the whole capacity",
			in:   fleetInput{Configured: 64, Instances: 1, Now: t0, Interval: sec},
			want: fleetDecision{Capacity: 64, Limit: 64}},
		{name: "three instances, no report: ceil(8/3)",
			in:   fleetInput{Configured: 8, Instances: 3, Now: t0, Interval: sec},
			want: fleetDecision{Capacity: 8, Limit: 3}},
		{name: "exact share without a report",
			in:   fleetInput{Configured: 9, Instances: 3, Now: t0, Interval: sec},
			want: fleetDecision{Capacity: 9, Limit: 3}},
		{name: "more instances than capacity: still one each",
			in:   fleetInput{Configured: 2, Instances: 5, Now: t0, Interval: sec},
			want: fleetDecision{Capacity: 2, Limit: 1}},
		{name: "instances 0 is treated as 1",
			in:   fleetInput{Configured: 10, Instances: 0, Now: t0, Interval: sec},
			want: fleetDecision{Capacity: 10, Limit: 10}},
		{name: "fresh report, others hold 5 of 8",
			in: fleetInput{Configured: 8, Instances: 3, Now: t0, Interval: sec,
				Report: &Load{InFlight: 7, At: t0.Add(-500 * time.Millisecond), MineThen: 2}},
			want: fleetDecision{Capacity: 8, Limit: 3, Fresh: true}},
		{name: "fresh report, the backend idle: the whole capacity",
			in: fleetInput{Configured: 8, Instances: 3, Now: t0, Interval: sec,
				Report: &Load{InFlight: 0, At: t0}},
			want: fleetDecision{Capacity: 8, Limit: 8, Fresh: true}},
		{name: "fresh report, all in flight is mine: the whole capacity",
			in: fleetInput{Configured: 8, Instances: 3, Now: t0, Interval: sec,
				Report: &Load{InFlight: 6, At: t0, MineThen: 6}},
			want: fleetDecision{Capacity: 8, Limit: 8, Fresh: true}},
		{name: "reported below mine_then (my requests ended first): others is 0",
			in: fleetInput{Configured: 8, Instances: 3, Now: t0, Interval: sec,
				Report: &Load{InFlight: 1, At: t0, MineThen: 4}},
			want: fleetDecision{Capacity: 8, Limit: 8, Fresh: true}},
		{name: "others over capacity: limit 0, never negative",
			in: fleetInput{Configured: 8, Instances: 3, Now: t0, Interval: sec,
				Report: &Load{InFlight: 12, At: t0, MineThen: 1}},
			want: fleetDecision{Capacity: 8, Limit: 0, Fresh: true}},
		{name: "reported capacity wins over the configured one",
			in: fleetInput{Configured: 8, Instances: 3, Now: t0, Interval: sec,
				Report: &Load{InFlight: 10, Capacity: 32, At: t0, MineThen: 4}},
			want: fleetDecision{Capacity: 32, Limit: 26, Fresh: true}},
		{name: "reported capacity below the configured one wins too",
			in: fleetInput{Configured: 100, Instances: 2, Now: t0, Interval: sec,
				Report: &Load{InFlight: 3, Capacity: 4, At: t0}},
			want: fleetDecision{Capacity: 4, Limit: 1, Fresh: true}},
		{name: "report exactly 3 intervals old is still fresh",
			in: fleetInput{Configured: 8, Instances: 2, Now: t0, Interval: sec,
				Report: &Load{InFlight: 6, At: t0.Add(-3 * sec)}},
			want: fleetDecision{Capacity: 8, Limit: 2, Fresh: true}},
		{name: "report older than 3 intervals counts as none (its capacity too)",
			in: fleetInput{Configured: 8, Instances: 2, Now: t0, Interval: sec,
				Report: &Load{InFlight: 6, Capacity: 40, At: t0.Add(-3*sec - time.Millisecond)}},
			want: fleetDecision{Capacity: 8, Limit: 4}},
		{name: "staleness scales with the interval",
			in: fleetInput{Configured: 8, Instances: 2, Now: t0, Interval: 100 * time.Millisecond,
				Report: &Load{InFlight: 6, At: t0.Add(-time.Second)}},
			want: fleetDecision{Capacity: 8, Limit: 4}},
		{name: "a report from the future (clock step) is fresh",
			in: fleetInput{Configured: 8, Instances: 2, Now: t0, Interval: sec,
				Report: &Load{InFlight: 6, At: t0.Add(time.Minute)}},
			want: fleetDecision{Capacity: 8, Limit: 2, Fresh: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := fleetLimit(tt.in); got != tt.want {
				t.Errorf("fleetLimit(%+v) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}
