package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"pollbal/secretfile"
)

// shutdownTimeout bounds how long in-flight requests may run after a signal.
const shutdownTimeout = 10 * time.Second

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

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

// errUsage reports a command line that was already explained on stderr; it exits 2.
var errUsage = errors.New("usage")

// parseFlags parses and checks args, writing the usage or the problem to stderr. It returns
// flag.ErrHelp for -h and errUsage for any bad command line.
func parseFlags(args []string, stderr io.Writer) (flags, error) {
	var f flags
	fs := flag.NewFlagSet("example-backend", flag.ContinueOnError)
	fs.SetOutput(stderr)
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
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return flags{}, flag.ErrHelp
		}
		return flags{}, errUsage
	}
	var problem string
	switch {
	case fs.NArg() > 0:
		problem = "unexpected arguments: " + strings.Join(fs.Args(), " ")
	case f.listen == "":
		problem = "-listen is required"
	case f.delay < 0:
		problem = "-delay must not be negative"
	case f.capacity < 0:
		problem = "-capacity must not be negative"
	}
	if problem != "" {
		fmt.Fprintf(stderr, "example-backend: %s\n", problem)
		return flags{}, errUsage
	}
	return f, nil
}

// run parses args, serves until ctx ends, and returns the process exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f, err := parseFlags(args, stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case err != nil:
		return 2
	}
	var secret []byte
	if f.secretFile != "" {
		s, err := secretfile.Read(f.secretFile)
		if err != nil {
			fmt.Fprintf(stderr, "example-backend: read secret: %v\n", err)
			return 1
		}
		secret = s
	}

	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		fmt.Fprintf(stderr, "example-backend: listen: %v\n", err)
		return 1
	}
	id := f.id
	if id == "" {
		// The bound address, so that -listen 127.0.0.1:0 still gets a unique id.
		id = ln.Addr().String()
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil)).With("backend", id)
	h := newHandler(handlerOptions{
		ID:           id,
		PoolFile:     f.poolFile,
		LockFile:     f.lockFile,
		Secret:       secret,
		Delay:        f.delay,
		Capacity:     f.capacity,
		NoLoadReport: f.noReport,
		Logger:       logger,
		Now:          time.Now,
	})
	fmt.Fprintf(stdout, "listening %s\n", ln.Addr())
	return serve(ctx, ln, h, logger, stderr)
}

// serve serves h on ln until ctx ends, then shuts down gracefully within shutdownTimeout. It
// returns the process exit code.
func serve(ctx context.Context, ln net.Listener, h http.Handler, logger *slog.Logger, stderr io.Writer) int {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()

	select {
	case err := <-errc:
		fmt.Fprintf(stderr, "example-backend: serve: %v\n", err)
		return 1
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		fmt.Fprintf(stderr, "example-backend: shutdown: %v\n", err)
		return 1
	}
	<-errc
	logger.Info("stopped")
	return 0
}
