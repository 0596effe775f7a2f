package main

// Issue 28: extra arguments were ignored (`pollbal run -config x extra`, `pollbal version -x`),
// `pollbal run -h` exited 2 with a bare "Usage of run:", and there was no man page.

import (
	"bytes"
	"flag"
	"os/exec"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestCLIUsage(t *testing.T) {
	for _, tc := range []struct {
		name           string
		args           []string
		wantCode       int
		stdout, stderr string // what each must contain; "" = must be empty
	}{
		{name: "no command", args: nil, wantCode: 2, stderr: "usage:\n  pollbal run -config FILE"},
		{name: "-h", args: []string{"-h"}, wantCode: 0, stdout: "usage:\n  pollbal run -config FILE"},
		{name: "help", args: []string{"help"}, wantCode: 0, stdout: "\ncommands:\n  run "},
		{name: "unknown command", args: []string{"serve"}, wantCode: 2, stderr: "pollbal: unknown command \"serve\"\n\nusage:"},
		{name: "run -h", args: []string{"run", "-h"}, wantCode: 0, stdout: "usage: pollbal run -config FILE"},
		{name: "check -help", args: []string{"check", "-help"}, wantCode: 0, stdout: "usage: pollbal check -config FILE [-skip-files]"},
		{name: "version -h", args: []string{"version", "-h"}, wantCode: 0, stdout: "usage: pollbal version\n\nPrints one line"},
		{name: "help -h", args: []string{"help", "-h"}, wantCode: 0, stdout: "usage: pollbal help [-man] [COMMAND]"},
		{name: "help run is run -h", args: []string{"help", "run"}, wantCode: 0, stdout: "usage: pollbal run -config FILE"},
		{name: "an argument after run's flags", args: []string{"run", "-config", "x.yaml", "extra"}, wantCode: 2,
			stderr: "pollbal run: unexpected arguments: extra\n\nusage: pollbal run"},
		{name: "an argument before check's flags", args: []string{"check", "x.yaml"}, wantCode: 2,
			stderr: "pollbal check: unexpected arguments: x.yaml\n"},
		{name: "a flag version does not have", args: []string{"version", "-x"}, wantCode: 2,
			stderr: "flag provided but not defined: -x\n\nusage: pollbal version"},
		{name: "an argument after version", args: []string{"version", "now"}, wantCode: 2, stderr: "pollbal version: unexpected arguments: now"},
		{name: "an unknown flag of run", args: []string{"run", "-confg", "x.yaml"}, wantCode: 2, stderr: "flag provided but not defined: -confg"},
		{name: "run without -config", args: []string{"run"}, wantCode: 2, stderr: "pollbal run: -config is required"},
		{name: "help for an unknown command", args: []string{"help", "serve"}, wantCode: 2, stderr: "pollbal help: unknown command \"serve\""},
		{name: "help for two commands", args: []string{"help", "run", "check"}, wantCode: 2, stderr: "pollbal help: one command at most"},
		{name: "help -man with a command", args: []string{"help", "-man", "run"}, wantCode: 2, stderr: "-man prints the whole manual"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr strings.Builder
			if code := realMain(tc.args, &stdout, &stderr); code != tc.wantCode {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.wantCode, stdout.String(), stderr.String())
			}
			for _, out := range []struct{ name, got, want string }{{"stdout", stdout.String(), tc.stdout}, {"stderr", stderr.String(), tc.stderr}} {
				if (out.want == "") != (out.got == "") || !strings.Contains(out.got, out.want) {
					t.Errorf("%s = %q, want it to contain %q", out.name, out.got, out.want)
				}
			}
		})
	}
}

// TestCLIEveryCommandExplainsItself: each command's -h describes it and lists each of its
// flags with what it does, on stdout, with exit status 0.
func TestCLIEveryCommandExplainsItself(t *testing.T) {
	p := usageProgram()
	for _, c := range p.Commands {
		t.Run(c.Name, func(t *testing.T) {
			var stdout, stderr strings.Builder
			if code := realMain([]string{c.Name, "-h"}, &stdout, &stderr); code != 0 || stderr.Len() > 0 {
				t.Fatalf("pollbal %s -h: exit %d, stderr %q", c.Name, code, stderr.String())
			}
			out := stdout.String()
			if c.Description == "" || !strings.Contains(out, strings.TrimSpace(c.Description)) {
				t.Errorf("pollbal %s -h does not describe the command:\n%s", c.Name, out)
			}
			p.FlagSet(c, nil).VisitAll(func(f *flag.Flag) {
				firstWords, _, _ := strings.Cut(strings.SplitN(f.Usage, "\n", 2)[0], "`")
				if !strings.Contains(out, "\n  -"+f.Name) || !strings.Contains(out, firstWords) {
					t.Errorf("pollbal %s -h does not explain -%s:\n%s", c.Name, f.Name, out)
				}
			})
		})
	}
}

// TestCLIManPage: the man page (pollbal help -man, shipped as pollbal.1) names every command
// and every flag, and renders without a warning where groff is installed.
func TestCLIManPage(t *testing.T) {
	var man, stderr strings.Builder
	if code := realMain([]string{"help", "-man"}, &man, &stderr); code != 0 {
		t.Fatalf("pollbal help -man: exit %d: %s", code, stderr.String())
	}
	page := man.String()
	p := usageProgram()
	flags := 0
	for _, c := range p.Commands {
		if !strings.Contains(page, "\n.SS pollbal "+c.Name+"\n") || !strings.Contains(page, "\n.B pollbal "+c.Name+"\n") {
			t.Errorf("the man page has no synopsis or section for pollbal %s", c.Name)
		}
		p.FlagSet(c, nil).VisitAll(func(f *flag.Flag) {
			flags++
			if !regexp.MustCompile(`\n\.BI? ` + regexp.QuoteMeta(roffDash("-"+f.Name)) + `( |\n)`).MatchString(page) {
				t.Errorf("the man page does not describe pollbal %s -%s", c.Name, f.Name)
			}
		})
	}
	if flags < 7 {
		t.Fatalf("found %d flags in the command definitions; want run's, check's and help's", flags)
	}
	for _, section := range []string{"NAME", "SYNOPSIS", "DESCRIPTION", "COMMANDS", "SIGNALS", "EXIT STATUS", "FILES", "SEE ALSO"} {
		if !strings.Contains(page, "\n.SH "+section+"\n") {
			t.Errorf("the man page has no %s section", section)
		}
	}
	groff, err := exec.LookPath("groff")
	if err != nil {
		t.Log("groff not installed (Debian: groff-base): the page was not rendered")
		return
	}
	cmd := exec.Command(groff, "-man", "-Tutf8", "-P-cbou", "-ww")
	cmd.Stdin = strings.NewReader(page)
	var rendered, warnings bytes.Buffer
	cmd.Stdout, cmd.Stderr = &rendered, &warnings
	if err := cmd.Run(); err != nil || warnings.Len() > 0 {
		t.Fatalf("groff -man: %v\n%s", err, warnings.String())
	}
	if !strings.Contains(rendered.String(), "pollbal check -config FILE [-skip-files]") {
		t.Errorf("the rendered page lacks the check synopsis:\n%s", rendered.String())
	}
}

// roffDash writes s as the man page does: hyphens as \-.
func roffDash(s string) string { return strings.ReplaceAll(s, "-", `\-`) }

var versionRe = regexp.MustCompile(`^pollbal \S+ \(commit \S+, go\S+\)\n$`)

func TestVersion(t *testing.T) {
	var stdout, stderr strings.Builder
	if code := realMain([]string{"version"}, &stdout, &stderr); code != 0 || !versionRe.MatchString(stdout.String()) {
		t.Fatalf("pollbal version: exit %d, %q; want `pollbal VERSION (commit COMMIT, GOVERSION)`", code, stdout.String())
	}
	if !strings.HasSuffix(stdout.String(), ", "+runtime.Version()+")\n") {
		t.Errorf("pollbal version = %q, want the Go version %s", stdout.String(), runtime.Version())
	}
}

func TestVersionFallsBackOnBuildInfo(t *testing.T) {
	vcs := func(revision, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs.revision", Value: revision}, {Key: "vcs.modified", Value: modified}}
	}
	for _, tc := range []struct {
		name  string
		stamp build
		info  debug.BuildInfo
		want  string
	}{
		{name: "stamped by make", stamp: build{version: "v0.9.0", commit: "abc1234", goVersion: "go1.26.8"},
			info: debug.BuildInfo{Settings: vcs("ffffffffffffffff", "false")}, want: "pollbal v0.9.0 (commit abc1234, go1.26.8)"},
		{name: "go build in a checkout", stamp: build{version: "dev", goVersion: "go1.26.8"},
			info: debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs("0123456789abcdef", "false")},
			want: "pollbal dev (commit 0123456, go1.26.8)"},
		{name: "go build with changes", stamp: build{version: "dev", goVersion: "go1.26.8"},
			info: debug.BuildInfo{Settings: vcs("0123456789abcdef", "true")}, want: "pollbal dev (commit 0123456-dirty, go1.26.8)"},
		{name: "go install of a version", stamp: build{version: "dev", goVersion: "go1.26.8"},
			info: debug.BuildInfo{Main: debug.Module{Version: "v0.9.0"}}, want: "pollbal v0.9.0 (commit unknown, go1.26.8)"},
		{name: "nothing recorded", stamp: build{version: "dev", goVersion: "go1.26.8"}, want: "pollbal dev (commit unknown, go1.26.8)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := fillBuild(tc.stamp, &tc.info).String(); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
