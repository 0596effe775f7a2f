package cmdline

import (
	"errors"
	"flag"
	"strings"
	"testing"
)

// testProgram is a program "tool" with a command "go" (flag -n) and a command "say" that
// takes operands.
func testProgram(n *int) *Program {
	return &Program{
		Name:        "tool",
		Summary:     "a tool for tests",
		Description: "Tool does things.\n\nIn two paragraphs.",
		Commands: []*Command{
			{Name: "go", Args: "[-n N]", Summary: "go somewhere", Description: "Goes N steps.",
				Flags: func(fs *flag.FlagSet) { fs.IntVar(n, "n", 1, "how many `steps`") }},
			{Name: "say", Args: "WORD...", Summary: "say words", Description: "Says WORD.", Operands: "WORD..."},
		},
		Sections: []Section{{Title: "Exit status", Text: "\n  0  fine.\n  2  a bad command line."}},
	}
}

func TestProgramParse(t *testing.T) {
	for _, tc := range []struct {
		name, cmd, args  string
		wantErr          error
		stdout, stderr   string // what each must contain ("" = must be empty)
		wantN, wantNArgs int
	}{
		{name: "flags", cmd: "go", args: "-n 3", wantN: 3},
		{name: "help goes to stdout", cmd: "go", args: "-h", wantErr: flag.ErrHelp, wantN: 1,
			stdout: "usage: tool go [-n N]\n\nGoes N steps.\n\nflags:\n  -n steps\n"},
		{name: "an unknown flag", cmd: "go", args: "-x", wantErr: ErrUsage, wantN: 1,
			stderr: "flag provided but not defined: -x\n\nusage: tool go [-n N]"},
		{name: "an argument left over", cmd: "go", args: "-n 2 extra", wantErr: ErrUsage, wantN: 2, wantNArgs: 1,
			stderr: "tool go: unexpected arguments: extra\n\nusage: tool go"},
		{name: "operands where the command takes them", cmd: "say", args: "hello world", wantN: 1, wantNArgs: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := 1
			p := testProgram(&n)
			var stdout, stderr strings.Builder
			c := p.Lookup(tc.cmd)
			fs := p.FlagSet(c, &stderr)
			err := p.Parse(c, fs, strings.Fields(tc.args), &stdout)
			if !errors.Is(err, tc.wantErr) || (err == nil) != (tc.wantErr == nil) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if n != tc.wantN || fs.NArg() != tc.wantNArgs {
				t.Errorf("-n %d and %d operands, want %d and %d", n, fs.NArg(), tc.wantN, tc.wantNArgs)
			}
			for _, out := range []struct{ name, got, want string }{{"stdout", stdout.String(), tc.stdout}, {"stderr", stderr.String(), tc.stderr}} {
				if (out.want == "") != (out.got == "") || !strings.Contains(out.got, out.want) {
					t.Errorf("%s = %q, want it to contain %q", out.name, out.got, out.want)
				}
			}
		})
	}
}

func TestProgramHelp(t *testing.T) {
	var out strings.Builder
	testProgram(new(int)).Help(&out)
	want := "usage:\n  tool go [-n N]\n  tool say WORD...\n\ncommands:\n  go   go somewhere\n  say  say words\n\n" +
		"`tool COMMAND -h` describes a command and its flags; the manual: man tool\n"
	if out.String() != want {
		t.Errorf("Help:\n%s\nwant:\n%s", out.String(), want)
	}
}

func TestProgramMan(t *testing.T) {
	var out strings.Builder
	testProgram(new(int)).Man(&out, "v1.2.3")
	want := `.TH TOOL 1 "" "tool v1.2.3" "User Commands"
.SH NAME
tool \- a tool for tests
.SH SYNOPSIS
.B tool go
[\-n N]
.br
.B tool say
WORD...
.SH DESCRIPTION
Tool does things.
.PP
In two paragraphs.
.SH COMMANDS
.SS tool go
Goes N steps.
.TP
.BI \-n " steps"
how many steps (default 1)
.SS tool say
Says WORD.
.SH EXIT STATUS
.TP
.B 0
fine.
.TP
.B 2
a bad command line.
`
	if out.String() != want {
		t.Errorf("Man:\n%s\nwant:\n%s", out.String(), want)
	}
}

func TestRoffText(t *testing.T) {
	for in, want := range map[string]string{
		"-config FILE":    `\-config FILE`,
		`a\b`:             `a\eb`,
		".starts a macro": `\&.starts a macro`,
		"'also":           `\&'also`,
		"plain":           "plain",
	} {
		if got := roffText(in); got != want {
			t.Errorf("roffText(%q) = %q, want %q", in, got, want)
		}
	}
}
