package handover

import (
	"errors"
	"testing"
)

func TestBinaryPath(t *testing.T) {
	lookPath := func(name string) (string, error) {
		switch name {
		case "pollbal":
			return "/usr/local/bin/pollbal", nil
		case "dotted":
			return "./dotted", nil // a relative PATH entry
		}
		return "", errors.New("not found")
	}
	executable := func() (string, error) { return "/opt/pollbal/releases/v1/pollbal", nil }
	noExecutable := func() (string, error) { return "", errors.New("no /proc") }
	for _, tc := range []struct {
		name, arg0 string
		executable func() (string, error)
		want       string // "" for an error
	}{
		{name: "absolute: as started, links resolved at upgrade time", arg0: "/opt/pollbal/current/pollbal", executable: executable,
			want: "/opt/pollbal/current/pollbal"},
		{name: "absolute, unclean", arg0: "/usr/local/bin/../bin/pollbal", executable: executable, want: "/usr/local/bin/pollbal"},
		{name: "relative: against the working directory at start", arg0: "bin/pollbal", executable: executable, want: "/srv/lb/bin/pollbal"},
		{name: "dot-relative", arg0: "./pollbal", executable: executable, want: "/srv/lb/pollbal"},
		{name: "found in PATH", arg0: "pollbal", executable: executable, want: "/usr/local/bin/pollbal"},
		{name: "found through a relative PATH entry: the executable", arg0: "dotted", executable: executable,
			want: "/opt/pollbal/releases/v1/pollbal"},
		{name: "not in PATH: the executable", arg0: "renamed", executable: executable, want: "/opt/pollbal/releases/v1/pollbal"},
		{name: "no arg0: the executable", arg0: "", executable: executable, want: "/opt/pollbal/releases/v1/pollbal"},
		{name: "nothing usable", arg0: "", executable: noExecutable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := binaryPath(tc.arg0, "/srv/lb", lookPath, tc.executable)
			if tc.want == "" {
				if err == nil {
					t.Errorf("got %q, want an error", got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
