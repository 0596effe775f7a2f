package main

import (
	"errors"
	"flag"
	"strings"
	"testing"
	"time"

	"pollbal/internal/cmdline"
)

func TestParseFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    flags
		wantErr error
		stderr  string // what stderr must say when wantErr is set
	}{
		{
			name: "listen only",
			args: []string{"-listen", "127.0.0.1:0"},
			want: flags{listen: "127.0.0.1:0"},
		},
		{
			name: "every flag",
			args: []string{"-listen", "127.0.0.1:9001", "-id", "b1", "-pool-file", "p", "-lock-file", "l",
				"-secret-file", "s", "-delay", "250ms", "-capacity", "8", "-no-load-report"},
			want: flags{listen: "127.0.0.1:9001", id: "b1", poolFile: "p", lockFile: "l", secretFile: "s",
				delay: 250 * time.Millisecond, capacity: 8, noReport: true},
		},
		{name: "help", args: []string{"-h"}, wantErr: flag.ErrHelp, stderr: "usage: example-backend"},
		{name: "unknown flag", args: []string{"-bogus"}, wantErr: cmdline.ErrUsage, stderr: "usage: example-backend"},
		{name: "missing listen", args: nil, wantErr: cmdline.ErrUsage, stderr: "example-backend: -listen is required"},
		{
			name: "stray argument", args: []string{"-listen", "127.0.0.1:0", "extra", "more"},
			wantErr: cmdline.ErrUsage, stderr: "example-backend: unexpected arguments: extra more",
		},
		{
			name: "negative delay", args: []string{"-listen", "127.0.0.1:0", "-delay", "-1s"},
			wantErr: cmdline.ErrUsage, stderr: "example-backend: -delay must not be negative",
		},
		{
			name: "negative capacity", args: []string{"-listen", "127.0.0.1:0", "-capacity", "-1"},
			wantErr: cmdline.ErrUsage, stderr: "example-backend: -capacity must not be negative",
		},
		{
			// The checks run in order: the first problem is the one reported.
			name: "stray argument before missing listen", args: []string{"extra"},
			wantErr: cmdline.ErrUsage, stderr: "example-backend: unexpected arguments: extra",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stderr strings.Builder
			got, err := parseFlags(tc.args, &stderr)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("err = %v, want %v; stderr:\n%s", err, tc.wantErr, stderr.String())
			}
			if tc.wantErr != nil {
				if !strings.Contains(stderr.String(), tc.stderr) {
					t.Fatalf("stderr does not say %q:\n%s", tc.stderr, stderr.String())
				}
				return
			}
			if got != tc.want {
				t.Fatalf("flags = %+v, want %+v", got, tc.want)
			}
			if stderr.Len() != 0 {
				t.Fatalf("stderr = %q, want nothing", stderr.String())
			}
		})
	}
}
