package main

import (
	"fmt"
	"io"

	"pollbal/internal/cmdline"
)

// parseArgs parses the arguments of command c (what follows its name) into the options c is
// bound to: -h prints c's help to stdout (flag.ErrHelp), a bad command line prints the problem
// and c's help to stderr (cmdline.ErrUsage).
func parseArgs(c *cmdline.Command, args []string, stdout, stderr io.Writer) error {
	p := usageProgram()
	return p.Parse(c, p.FlagSet(c, stderr), args, stdout)
}

// help runs `pollbal help [-man] [COMMAND]`.
func help(args []string, stdout, stderr io.Writer) int {
	var o helpOptions
	p := usageProgram()
	c := helpCommand(&o)
	fs := p.FlagSet(c, stderr)
	if err := p.Parse(c, fs, args, stdout); err != nil {
		return cmdline.ExitCode(err)
	}
	switch {
	case fs.NArg() > 1:
		fmt.Fprintf(stderr, "pollbal help: one command at most, got %q\n", fs.Args())
		return 2
	case o.man && fs.NArg() > 0:
		fmt.Fprintln(stderr, "pollbal help: -man prints the whole manual; it takes no command")
		return 2
	case o.man:
		p.Man(stdout, buildVersion().version)
	case fs.NArg() == 1:
		named := p.Lookup(fs.Arg(0))
		if named == nil {
			fmt.Fprintf(stderr, "pollbal help: unknown command %q\n\n", fs.Arg(0))
			p.Help(stderr)
			return 2
		}
		p.CommandHelp(stdout, named)
	default:
		p.Help(stdout)
	}
	return 0
}
