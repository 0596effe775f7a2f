package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"pollbal/internal/cmdline"
	"pollbal/internal/secretfile"
)

// shutdownTimeout bounds how long in-flight requests may run after a signal.
const shutdownTimeout = 10 * time.Second

func main() { cmdline.Main(run) }

// run parses args, serves until ctx ends, and returns the process exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f, err := parseFlags(args, stderr)
	if err != nil {
		return cmdline.ExitCode(err)
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
