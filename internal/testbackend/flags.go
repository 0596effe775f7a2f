package main

import (
	"fmt"
	"io"
	"time"

	"pollbal/internal/cmdline"
)

// flags is the parsed command line.
type flags struct {
	listen     string
	id         string
	poolFile   string
	lockFile   string
	secretFile string
	delay      time.Duration
	capacity   int
	noReport   bool
}

// parseFlags parses and checks args, writing the usage or the problem to stderr. It returns
// flag.ErrHelp for -h and cmdline.ErrUsage for any bad command line.
func parseFlags(args []string, stderr io.Writer) (flags, error) {
	var f flags
	fs := cmdline.NewFlagSet("example-backend", stderr)
	fs.StringVar(&f.listen, "listen", "", "address to listen on, e.g. 127.0.0.1:9001 (port 0 picks a free port; required)")
	fs.StringVar(&f.id, "id", "", "backend id returned in bodies and X-Backend-Id (default: the bound listen address)")
	fs.StringVar(&f.poolFile, "pool-file", "", "file served by GET /pool (missing file: empty body = out of rotation)")
	fs.StringVar(&f.lockFile, "lock-file", "", "file touched by POST /pool_warning")
	fs.StringVar(&f.secretFile, "secret-file", "", "when set, POST /pool_warning must carry a valid HMAC signature with this secret")
	fs.DurationVar(&f.delay, "delay", 0, "delay before answering requests on other paths")
	fs.IntVar(&f.capacity, "capacity", 0, "> 0: refuse client requests past this many at once (503 + X-Pool-Full) and report X-Pool-Load on /pool")
	fs.BoolVar(&f.noReport, "no-load-report", false, "with -capacity: enforce it but send no X-Pool-Load (balancers then split the capacity evenly)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: example-backend -listen HOST:PORT [-id ID] [-pool-file FILE] [-lock-file FILE] [-secret-file FILE] [-delay D] [-capacity N [-no-load-report]]")
		fs.PrintDefaults()
	}
	if err := cmdline.Parse(fs, args); err != nil {
		return flags{}, err
	}
	switch {
	case f.listen == "":
		return flags{}, cmdline.Refuse(fs, "-listen is required")
	case f.delay < 0:
		return flags{}, cmdline.Refuse(fs, "-delay must not be negative")
	case f.capacity < 0:
		return flags{}, cmdline.Refuse(fs, "-capacity must not be negative")
	}
	return f, nil
}
