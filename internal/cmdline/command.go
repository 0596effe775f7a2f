package cmdline

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// Program is a command with subcommands (`pollbal run`, `pollbal check`): the one place its
// usage is defined. Its help (Help), each command's help (Command.Help) and its man page
// (Man) are rendered from it, so that none of them can say something another does not.
type Program struct {
	Name    string
	Summary string // one line: what the program is, for the man page's NAME
	// Description is the man page's DESCRIPTION: paragraphs separated by blank lines.
	Description string
	Commands    []*Command
	// Sections are the man page's sections after COMMANDS (SIGNALS, FILES, EXIT STATUS,
	// SEE ALSO...).
	Sections []Section
}

// Command is one subcommand. Not safe for concurrent use: Flags binds the flags to the values
// the command reads.
type Command struct {
	Name string
	// Args is what follows the name in a synopsis, e.g. "-config FILE [-skip-files]".
	Args    string
	Summary string // one line, in the program's list of commands
	// Description is what `PROGRAM NAME -h` prints above the flags: paragraphs separated by
	// blank lines.
	Description string
	// Flags defines the command's flags on fs; nil for a command without any.
	Flags func(fs *flag.FlagSet)
	// Operands names what may follow the flags (e.g. "[COMMAND]"); "" when nothing may, and
	// then anything there is refused.
	Operands string
}

// Section is a man page section; Text is paragraphs separated by blank lines, and a paragraph
// whose lines all start with two spaces is a list of "  TERM  definition" items.
type Section struct {
	Title string
	Text  string
}

// Synopsis is the command's usage line, e.g. "pollbal check -config FILE [-skip-files]".
func (p *Program) Synopsis(c *Command) string {
	return strings.TrimSpace(p.Name + " " + c.Name + " " + c.Args)
}

// Lookup returns the command called name, or nil.
func (p *Program) Lookup(name string) *Command {
	for _, c := range p.Commands {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// Help writes the program's usage: every command's synopsis, then each command's summary.
func (p *Program) Help(w io.Writer) {
	fmt.Fprintln(w, "usage:")
	width := 0
	for _, c := range p.Commands {
		fmt.Fprintf(w, "  %s\n", p.Synopsis(c))
		width = max(width, len(c.Name))
	}
	fmt.Fprintln(w, "\ncommands:")
	for _, c := range p.Commands {
		fmt.Fprintf(w, "  %-*s  %s\n", width, c.Name, c.Summary)
	}
	fmt.Fprintf(w, "\n`%s COMMAND -h` describes a command and its flags; the manual: man %s\n", p.Name, p.Name)
}

// FlagSet returns c's flag set, its flags defined; it writes its problems to stderr.
func (p *Program) FlagSet(c *Command, stderr io.Writer) *flag.FlagSet {
	fs := NewFlagSet(p.Name+" "+c.Name, stderr)
	if c.Flags != nil {
		c.Flags(fs)
	}
	// The flag package calls Usage on -h and after a problem; Parse writes the help itself,
	// to stdout for -h and to stderr after a problem.
	fs.Usage = func() {}
	return fs
}

// CommandHelp writes what `PROGRAM NAME -h` prints: the synopsis, the description, the flags.
// It defines c's flags anew, which sets the values they are bound to to their defaults.
func (p *Program) CommandHelp(w io.Writer, c *Command) {
	p.commandHelp(w, c, p.FlagSet(c, io.Discard))
}

// commandHelp is CommandHelp with c's flag set fs, whose output it leaves as it was.
func (p *Program) commandHelp(w io.Writer, c *Command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "usage: %s\n", p.Synopsis(c))
	if c.Description != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(c.Description))
	}
	if hasFlags(fs) {
		fmt.Fprintln(w, "\nflags:")
		out := fs.Output()
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(out)
	}
}

// Parse parses args (what follows the command's name) with fs, a flag set from FlagSet. On
// -h or -help it writes c's help to stdout and returns flag.ErrHelp; on a flag it does not
// define or cannot parse, or an argument after the flags when c takes none, it writes the
// problem and c's help to stderr and returns ErrUsage. The operands, if c takes any, are
// fs.Args().
func (p *Program) Parse(c *Command, fs *flag.FlagSet, args []string, stdout io.Writer) error {
	stderr := fs.Output()
	err := fs.Parse(args)
	if err == nil && c.Operands == "" && fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected arguments: %s\n", fs.Name(), strings.Join(fs.Args(), " "))
		err = ErrUsage
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		p.commandHelp(stdout, c, fs)
		return flag.ErrHelp
	}
	fmt.Fprintln(stderr)
	p.commandHelp(stderr, c, fs)
	return ErrUsage
}

func hasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}
