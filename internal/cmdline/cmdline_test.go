package cmdline

import (
	"errors"
	"flag"
	"strings"
	"testing"
)

// parse parses args with a flag set "tool" that has -n, and returns -n, stderr and the error.
func parse(args ...string) (int, string, error) {
	var stderr strings.Builder
	fs := NewFlagSet("tool", &stderr)
	n := fs.Int("n", 1, "a number")
	err := Parse(fs, args)
	return *n, stderr.String(), err
}

func TestParseAccepts(t *testing.T) {
	for args, want := range map[string]int{"": 1, "-n 5": 5, "-n=7": 7} {
		n, stderr, err := parse(strings.Fields(args)...)
		if err != nil || n != want || stderr != "" {
			t.Errorf("%q: err %v, -n %d, stderr %q; want no error, -n %d, nothing on stderr", args, err, n, stderr, want)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    string
		wantErr error
		stderr  string // what stderr must contain
	}{
		{name: "help", args: "-h", wantErr: flag.ErrHelp, stderr: "Usage of tool:"},
		{name: "long help", args: "-help", wantErr: flag.ErrHelp, stderr: "Usage of tool:"},
		{name: "unknown flag", args: "-bogus", wantErr: ErrUsage, stderr: "flag provided but not defined: -bogus"},
		{name: "bad value", args: "-n many", wantErr: ErrUsage, stderr: `invalid value "many" for flag -n`},
		{name: "arguments after the flags", args: "-n 2 a b", wantErr: ErrUsage, stderr: "tool: unexpected arguments: a b\n"},
		{name: "an argument ends the flags", args: "a -n 2", wantErr: ErrUsage, stderr: "tool: unexpected arguments: a -n 2\n"},
	} {
		_, stderr, err := parse(strings.Fields(tc.args)...)
		if err != tc.wantErr || !strings.Contains(stderr, tc.stderr) {
			t.Errorf("%s (%q): err %v, stderr %q; want %v and stderr containing %q", tc.name, tc.args, err, stderr, tc.wantErr, tc.stderr)
		}
	}
}

func TestRefuse(t *testing.T) {
	var stderr strings.Builder
	fs := NewFlagSet("tool", &stderr)
	err := Refuse(fs, "-n %d: want 1..%d", 0, 9)
	if !errors.Is(err, ErrUsage) {
		t.Fatalf("err = %v, want ErrUsage", err)
	}
	if got, want := stderr.String(), "tool: -n 0: want 1..9\n"; got != want {
		t.Errorf("stderr = %q, want %q", got, want)
	}
}

func TestExitCode(t *testing.T) {
	for err, want := range map[error]int{nil: 0, flag.ErrHelp: 0, ErrUsage: 2, errors.New("other"): 2} {
		if got := ExitCode(err); got != want {
			t.Errorf("ExitCode(%v) = %d, want %d", err, got, want)
		}
	}
}
