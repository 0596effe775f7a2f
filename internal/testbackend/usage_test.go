package main

import (
	"context"
	"strings"
	"testing"
)

// Issue 14: `example-backend -h` said "Usage of backend"; the binary `make build` makes is
// bin/example-backend, and every message names it so.
func TestUsageNamesTheBinary(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
		want     string
	}{
		{name: "help", args: []string{"-h"}, wantCode: 0, want: "usage: example-backend -listen HOST:PORT"},
		{name: "missing listen", args: nil, wantCode: 2, want: "example-backend: -listen is required"},
		{name: "unknown flag", args: []string{"-bogus"}, wantCode: 2, want: "usage: example-backend"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut strings.Builder
			if code := run(context.Background(), tc.args, &out, &errOut); code != tc.wantCode {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, tc.wantCode, errOut.String())
			}
			if !strings.Contains(errOut.String(), tc.want) || strings.Contains(errOut.String(), "Usage of backend") {
				t.Fatalf("stderr does not say %q:\n%s", tc.want, errOut.String())
			}
		})
	}
}
