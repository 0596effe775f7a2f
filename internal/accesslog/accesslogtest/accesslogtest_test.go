package accesslogtest

import (
	"encoding/json"
	"fmt"
	"testing"
)

// recorder is a testing.TB that keeps the errors reported to it.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func TestCheck(t *testing.T) {
	var line map[string]any
	if err := json.Unmarshal([]byte(`{"status": 503, "reason": "pool_exhausted", "attempts": 0, "upstream_ms": 1.5}`), &line); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		want   map[string]any
		errors int
	}{
		{"nothing named", nil, 0},
		{"an int against a JSON number", map[string]any{"status": 503, "attempts": 0}, 0},
		{"a float and a string", map[string]any{"upstream_ms": 1.5, "reason": "pool_exhausted"}, 0},
		{"an absent field wanted absent", map[string]any{"backend": nil}, 0},
		{"another value", map[string]any{"status": 502}, 1},
		{"a present field wanted absent", map[string]any{"reason": nil}, 1},
		{"an absent field wanted", map[string]any{"backend": "b1"}, 1},
		{"each wrong field is an error", map[string]any{"status": 200, "attempts": 1, "reason": nil}, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := &recorder{TB: t}
			Check(r, "the line", line, tc.want)
			if len(r.errs) != tc.errors {
				t.Errorf("Check reported %d errors, want %d: %q", len(r.errs), tc.errors, r.errs)
			}
		})
	}
}
