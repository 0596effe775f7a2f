package main

import (
	"slices"
	"testing"
)

func TestWithAwakeSysmon(t *testing.T) {
	tests := []struct {
		name string
		env  []string
		want []string
		ok   bool
	}{
		{name: "no GODEBUG", env: []string{"HOME=/root"}, want: []string{"HOME=/root", "GODEBUG=" + awakeSysmon}, ok: true},
		{name: "empty environment", env: nil, want: []string{"GODEBUG=" + awakeSysmon}, ok: true},
		{name: "empty GODEBUG", env: []string{"GODEBUG=", "A=1"}, want: []string{"GODEBUG=" + awakeSysmon, "A=1"}, ok: true},
		{name: "other settings kept", env: []string{"GODEBUG=gctrace=1,madvdontneed=1"},
			want: []string{"GODEBUG=gctrace=1,madvdontneed=1," + awakeSysmon}, ok: true},
		{name: "operator's schedtrace kept", env: []string{"GODEBUG=schedtrace=1000"}, want: []string{"GODEBUG=schedtrace=1000"}},
		{name: "schedtrace=0 keeps the default", env: []string{"GODEBUG=gctrace=1,schedtrace=0"}, want: []string{"GODEBUG=gctrace=1,schedtrace=0"}},
		{name: "already re-executed", env: []string{"GODEBUG=" + awakeSysmon}, want: []string{"GODEBUG=" + awakeSysmon}},
		{name: "scheddetail is another key", env: []string{"GODEBUG=scheddetail=1"},
			want: []string{"GODEBUG=scheddetail=1," + awakeSysmon}, ok: true},
		{name: "a look-alike variable", env: []string{"XGODEBUG=schedtrace=1"},
			want: []string{"XGODEBUG=schedtrace=1", "GODEBUG=" + awakeSysmon}, ok: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := slices.Clone(tt.env)
			got, ok := withAwakeSysmon(in)
			if ok != tt.ok || !slices.Equal(got, tt.want) {
				t.Errorf("withAwakeSysmon(%q) = %q, %v; want %q, %v", tt.env, got, ok, tt.want, tt.ok)
			}
			if !slices.Equal(in, tt.env) {
				t.Errorf("withAwakeSysmon changed its argument to %q", in)
			}
		})
	}
}
