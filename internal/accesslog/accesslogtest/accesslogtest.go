// Package accesslogtest checks JSON access-log lines, for tests: the proxy's, read from its
// logger, and the end-to-end tests', read from pollbal's file.
//
// It is imported only by _test.go files.
package accesslogtest

import (
	"fmt"
	"testing"
)

// Check compares the fields of line, a decoded JSON access-log line, named in want: a value
// compares by its printed form, an int as the float64 JSON decodes it to, and nil wants the
// field absent. Fields want does not name are not looked at. what names the line in errors.
func Check(t testing.TB, what string, line, want map[string]any) {
	t.Helper()
	for k, w := range want {
		got, ok := line[k]
		if w == nil {
			if ok {
				t.Errorf("%s: %s = %v, want it absent", what, k, got)
			}
			continue
		}
		if n, isInt := w.(int); isInt {
			w = float64(n)
		}
		if !ok || fmt.Sprint(got) != fmt.Sprint(w) {
			t.Errorf("%s: %s = %v, want %v\nline: %v", what, k, got, w, line)
		}
	}
}
