package protocol

import "testing"

func TestEqualReports(t *testing.T) {
	web := Report{Service: "web", Status: Serving, Version: "v1"}
	tests := []struct {
		name string
		a, b []Report
		want bool
	}{
		{name: "both nil", a: nil, b: nil, want: true},
		{name: "nil (not ready) differs from empty (ready, no services)", a: nil, b: []Report{}, want: false},
		{name: "same lines", a: []Report{web}, b: []Report{web}, want: true},
		{name: "status differs", a: []Report{web}, b: []Report{{Service: "web", Status: Leaving, Version: "v1"}}, want: false},
		{name: "version differs", a: []Report{web}, b: []Report{{Service: "web", Status: Serving, Version: "v2"}}, want: false},
		{name: "order matters", a: []Report{web, {Service: "api"}}, b: []Report{{Service: "api"}, web}, want: false},
		{name: "length differs", a: []Report{web}, b: []Report{web, web}, want: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := EqualReports(tc.a, tc.b); got != tc.want {
				t.Fatalf("EqualReports(%v, %v) = %t, want %t", tc.a, tc.b, got, tc.want)
			}
		})
	}
}
