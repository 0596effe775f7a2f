// Command refproxy is the minimal fasthttp reverse proxy used as the reference floor in the
// side-by-side benchmark (bench/run.sh): a fasthttp.Server in front of a fasthttp.LBClient whose
// clients are one fasthttp.HostClient per backend (LBClient picks the client with the fewest
// pending requests, a least-connections policy). It does nothing else: no access log, no
// X-Forwarded-* headers, no retries beyond HostClient's idempotent default, no health checks
// besides LBClient's built-in error penalty. It listens on and forwards to loopback only.
//
//	refproxy -addr 127.0.0.1:18094 -backends 127.0.0.1:18081,127.0.0.1:18082
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"pollbal/bench/internal/loopback"
)

// hopHeaders lists the hop-by-hop headers (RFC 9110 section 7.6.1) a proxy must not forward.
func hopHeaders() []string {
	return []string{
		"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate",
		"Proxy-Authorization", "TE", "Trailer", "Upgrade",
	}
}

type options struct {
	addr     string
	backends string
	timeout  time.Duration
	maxConns int
}

func main() {
	fs := flag.NewFlagSet("refproxy", flag.ExitOnError)
	var o options
	fs.StringVar(&o.addr, "addr", "127.0.0.1:18094", "listen address (loopback only)")
	fs.StringVar(&o.backends, "backends", "127.0.0.1:18081,127.0.0.1:18082", "comma-separated backend host:port list (loopback only)")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Second, "per-request upstream timeout")
	fs.IntVar(&o.maxConns, "maxconns", 512, "max upstream connections per backend")
	_ = fs.Parse(os.Args[1:])
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "refproxy:", err)
		os.Exit(1)
	}
}

// newHandler returns the proxy's request handler forwarding through lb.
func newHandler(lb *fasthttp.LBClient) fasthttp.RequestHandler {
	hops := hopHeaders()
	return func(ctx *fasthttp.RequestCtx) {
		req := &ctx.Request
		for _, h := range hops {
			req.Header.Del(h)
		}
		// The client's keep-alive choice is between it and us, not the backend.
		req.Header.ResetConnectionClose()
		resp := &ctx.Response
		if err := lb.Do(req, resp); err != nil {
			resp.Reset()
			ctx.Error("bad gateway: "+err.Error(), fasthttp.StatusBadGateway)
			return
		}
		for _, h := range hops {
			resp.Header.Del(h)
		}
		resp.Header.ResetConnectionClose()
	}
}

func run(o options) error {
	if err := loopback.Check(o.addr); err != nil {
		return err
	}
	var clients []fasthttp.BalancingClient
	for _, b := range strings.Split(o.backends, ",") {
		b = strings.TrimSpace(b)
		if b == "" {
			continue
		}
		if err := loopback.Check(b); err != nil {
			return err
		}
		clients = append(clients, &fasthttp.HostClient{
			Addr:                          b,
			MaxConns:                      o.maxConns,
			ReadTimeout:                   o.timeout,
			WriteTimeout:                  o.timeout,
			NoDefaultUserAgentHeader:      true,
			DisableHeaderNamesNormalizing: true,
			DisablePathNormalizing:        true,
		})
	}
	if len(clients) == 0 {
		return fmt.Errorf("no backends")
	}
	lb := &fasthttp.LBClient{Clients: clients, Timeout: o.timeout}
	srv := &fasthttp.Server{
		Handler:                       newHandler(lb),
		Name:                          "refproxy",
		DisableHeaderNamesNormalizing: true,
		ReadTimeout:                   o.timeout,
		WriteTimeout:                  o.timeout,
	}
	ln, err := net.Listen("tcp4", o.addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", o.addr, err)
	}
	fmt.Fprintf(os.Stderr, "refproxy listening on %s -> %s\n", ln.Addr(), o.backends)
	if err := srv.Serve(ln); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}
