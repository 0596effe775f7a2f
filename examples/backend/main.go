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
)

// shutdownTimeout bounds how long in-flight requests may run after a signal.
const shutdownTimeout = 10 * time.Second

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run parses args, serves until ctx ends, and returns the process exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("example-backend", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "", "address to listen on, e.g. 127.0.0.1:9001 (port 0 picks a free port; required)")
	id := fs.String("id", "", "backend id returned in bodies and X-Backend-Id (default: the bound listen address)")
	poolFile := fs.String("pool-file", "", "file served by GET /pool (missing file: empty body = out of rotation)")
	lockFile := fs.String("lock-file", "", "file touched by POST /pool_warning")
	secretFile := fs.String("secret-file", "", "when set, POST /pool_warning must carry a valid HMAC signature with this secret")
	delay := fs.Duration("delay", 0, "delay before answering requests on other paths")
	capacity := fs.Int("capacity", 0, "> 0: refuse client requests past this many at once (503 + X-Pool-Full) and report X-Pool-Load on /pool")
	noReport := fs.Bool("no-load-report", false, "with -capacity: enforce it but send no X-Pool-Load (balancers then split the capacity evenly)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: example-backend -listen HOST:PORT [-id ID] [-pool-file FILE] [-lock-file FILE] [-secret-file FILE] [-delay D] [-capacity N [-no-load-report]]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "example-backend: unexpected arguments: %s\n", strings.Join(fs.Args(), " "))
		return 2
	}
	if *listen == "" {
		fmt.Fprintln(stderr, "example-backend: -listen is required")
		return 2
	}
	if *delay < 0 {
		fmt.Fprintln(stderr, "example-backend: -delay must not be negative")
		return 2
	}
	if *capacity < 0 {
		fmt.Fprintln(stderr, "example-backend: -capacity must not be negative")
		return 2
	}
	var secret []byte
	if *secretFile != "" {
		s, err := readSecret(*secretFile)
		if err != nil {
			fmt.Fprintf(stderr, "example-backend: %v\n", err)
			return 1
		}
		secret = s
	}

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintf(stderr, "example-backend: listen: %v\n", err)
		return 1
	}
	if *id == "" {
		// The bound address, so that -listen 127.0.0.1:0 still gets a unique id.
		*id = ln.Addr().String()
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil)).With("backend", *id)
	h := newHandler(handlerOptions{
		ID:           *id,
		PoolFile:     *poolFile,
		LockFile:     *lockFile,
		Secret:       secret,
		Delay:        *delay,
		Capacity:     *capacity,
		NoLoadReport: *noReport,
		Logger:       logger,
		Now:          time.Now,
	})

	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stdout, "listening %s\n", ln.Addr())

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

// readSecret returns the trimmed contents of path; an empty secret is an error.
func readSecret(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read secret: %w", err)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return nil, fmt.Errorf("read secret %s: file is empty", path)
	}
	return []byte(s), nil
}
