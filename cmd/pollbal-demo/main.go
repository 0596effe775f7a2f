package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"unsafe"

	"pollbal/internal/cmdline"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	go func() {
		// After the first Ctrl-C the demo cleans up; a second one ends it at once (the
		// children still get their parent-death signal).
		<-ctx.Done()
		stop()
	}()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv))
}

// run parses args, runs the demo and returns the exit code: 0 when the run passed, 1 when it
// failed or could not start, 2 on bad usage.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	o, err := parseOptions(args, getenv, stderr)
	if err != nil {
		return cmdline.ExitCode(err)
	}
	tty, width := terminal(stdout)
	d := &demo{o: o, out: stdout, tty: tty && !o.Quiet, width: width}
	s, err := d.Run(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "demo: %v\n", err)
		return 1
	}
	writeSummary(stdout, s)
	if len(s.problems()) > 0 {
		return 1
	}
	return 0
}

// terminal reports whether w is a terminal and, if so, its width in columns.
func terminal(w io.Writer) (bool, int) {
	f, ok := w.(*os.File)
	if !ok {
		return false, 0
	}
	fi, err := f.Stat()
	if err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return false, 0
	}
	var ws struct{ row, col, x, y uint16 }
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), uintptr(syscall.TIOCGWINSZ), uintptr(unsafe.Pointer(&ws)))
	if errno != 0 || ws.col == 0 {
		return true, 80
	}
	return true, int(ws.col)
}
