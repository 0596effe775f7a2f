package balancer

import (
	"reflect"
	"testing"
	"time"

	"pollbal/configs"
	"pollbal/protocol"
)

func TestNextHealth(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	t1 := t0.Add(time.Second)
	declared := map[string]configs.Service{"web": {}, "api": {}}
	web := protocol.Report{Service: "web", Status: protocol.Serving, Version: "v1"}
	webV2 := protocol.Report{Service: "web", Status: protocol.Serving, Version: "v2"}
	api := protocol.Report{Service: "api", Status: protocol.Serving, Version: "v1"}
	extra := protocol.Report{Service: "extra", Status: protocol.Serving, Version: "v1"}
	unchecked := &Health{Reason: "not checked yet"}
	readyWeb := &Health{Ready: true, Reports: []protocol.Report{web}, Checked: t0}

	tests := []struct {
		name   string
		old    *Health
		o      Observation
		want   *Health
		change healthChange
	}{
		{
			name:   "first check ready: no slow start",
			old:    unchecked,
			o:      Observation{Ready: true, Reports: []protocol.Report{web}, Checked: t1},
			want:   &Health{Ready: true, Reports: []protocol.Report{web}, Checked: t1},
			change: healthChange{Visible: true, ReadyChanged: true},
		},
		{
			name:   "ready after a check that found it not ready: slow start from this check",
			old:    &Health{Reason: "connection refused", Checked: t0},
			o:      Observation{Ready: true, Reports: []protocol.Report{web}, Checked: t1},
			want:   &Health{Ready: true, Reports: []protocol.Report{web}, Checked: t1, ReadySince: t1},
			change: healthChange{Visible: true, ReadyChanged: true},
		},
		{
			name:   "still ready, same reports: new check time only, slow start kept",
			old:    &Health{Ready: true, Reports: []protocol.Report{web}, Checked: t0, ReadySince: t0},
			o:      Observation{Ready: true, Reports: []protocol.Report{web}, Checked: t1},
			want:   &Health{Ready: true, Reports: []protocol.Report{web}, Checked: t1, ReadySince: t0},
			change: healthChange{},
		},
		{
			name:   "a report changed",
			old:    readyWeb,
			o:      Observation{Ready: true, Reports: []protocol.Report{webV2}, Checked: t1},
			want:   &Health{Ready: true, Reports: []protocol.Report{webV2}, Checked: t1},
			change: healthChange{Visible: true},
		},
		{
			name:   "a service added",
			old:    readyWeb,
			o:      Observation{Ready: true, Reports: []protocol.Report{web, api}, Checked: t1},
			want:   &Health{Ready: true, Reports: []protocol.Report{web, api}, Checked: t1},
			change: healthChange{Visible: true},
		},
		{
			name:   "not ready drops reports and ignored services",
			old:    &Health{Ready: true, Reports: []protocol.Report{web}, Ignored: []string{"extra"}, Checked: t0, ReadySince: t0},
			o:      Observation{Ready: false, Reason: "status 500", Reports: []protocol.Report{web, extra}, Checked: t1},
			want:   &Health{Reason: "status 500", Checked: t1, ReadySince: t0},
			change: healthChange{Visible: true, ReadyChanged: true},
		},
		{
			name:   "still not ready with a new reason: nothing visible",
			old:    &Health{Reason: "status 500", Checked: t0},
			o:      Observation{Reason: "timeout", Checked: t1},
			want:   &Health{Reason: "timeout", Checked: t1},
			change: healthChange{},
		},
		{
			name:   "an undeclared service is ignored and warned about once",
			old:    readyWeb,
			o:      Observation{Ready: true, Reports: []protocol.Report{web, extra}, Checked: t1},
			want:   &Health{Ready: true, Reports: []protocol.Report{web}, Ignored: []string{"extra"}, Checked: t1},
			change: healthChange{Visible: true, NewIgnored: true},
		},
		{
			name:   "the same undeclared service again: no new warning",
			old:    &Health{Ready: true, Reports: []protocol.Report{web}, Ignored: []string{"extra"}, Checked: t0},
			o:      Observation{Ready: true, Reports: []protocol.Report{web, extra}, Checked: t1},
			want:   &Health{Ready: true, Reports: []protocol.Report{web}, Ignored: []string{"extra"}, Checked: t1},
			change: healthChange{},
		},
		{
			name:   "the undeclared service gone: visible, no warning",
			old:    &Health{Ready: true, Reports: []protocol.Report{web}, Ignored: []string{"extra"}, Checked: t0},
			o:      Observation{Ready: true, Reports: []protocol.Report{web}, Checked: t1},
			want:   &Health{Ready: true, Reports: []protocol.Report{web}, Checked: t1},
			change: healthChange{Visible: true},
		},
		{
			name:   "only undeclared services: ready with no reports",
			old:    unchecked,
			o:      Observation{Ready: true, Reports: []protocol.Report{extra}, Checked: t1},
			want:   &Health{Ready: true, Ignored: []string{"extra"}, Checked: t1},
			change: healthChange{Visible: true, ReadyChanged: true, NewIgnored: true},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, change := nextHealth(tc.old, tc.o, declared)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("health = %+v, want %+v", got, tc.want)
			}
			if change != tc.change {
				t.Errorf("change = %+v, want %+v", change, tc.change)
			}
		})
	}
}
