package cmdline

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// ErrUsage reports a command line that cannot run; the problem has been written to the flag
// set's output.
var ErrUsage = errors.New("usage")

// NewFlagSet returns a flag set for the command name that writes its usage and its problems to
// stderr and leaves the exit to the caller.
func NewFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// Parse parses args with fs. It returns flag.ErrHelp for -h or -help (the usage has been
// written) and ErrUsage for a flag fs does not define or cannot parse, and for any argument
// after the flags.
func Parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return flag.ErrHelp
		}
		return ErrUsage
	}
	if fs.NArg() > 0 {
		return Refuse(fs, "unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	return nil
}

// Refuse writes "<command>: <problem>" and a newline to fs's output and returns ErrUsage.
func Refuse(fs *flag.FlagSet, format string, a ...any) error {
	fmt.Fprintf(fs.Output(), "%s: %s\n", fs.Name(), fmt.Sprintf(format, a...))
	return ErrUsage
}

// ExitCode is a command's exit code when its command line parsed to err: 0 for nil and for -h
// (flag.ErrHelp), 2 for any other error.
func ExitCode(err error) int {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	return 2
}

// Main runs a program whose run takes the process's arguments (after the program name) and
// its standard output and error, with a context that ends at SIGTERM or SIGINT, and exits
// with the code run returns.
func Main(run func(ctx context.Context, args []string, stdout, stderr io.Writer) int) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
