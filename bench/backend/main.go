// Command backend is the origin server for the side-by-side benchmark harness (bench/run.sh).
//
//	GET /       -> 200, fixed 1024-byte body (text/plain)
//	GET /pool   -> 200, "web serving v1" (a valid /pool answer, so pollbal schedules it)
//	GET /stats  -> 200, "<name> <requests served since start>" (not counted)
//	anything else -> 404
//
// It is deliberately tiny and allocation-free on the hot path (fasthttp, precomputed bodies,
// no logging) so that it is not the bottleneck. It listens on loopback addresses only.
// Run one process per instance: backend -addr 127.0.0.1:18081 -name b1
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/valyala/fasthttp"

	"pollbal/bench/internal/loopback"
)

// origin answers the benchmark's requests. It is safe for concurrent use and must not be copied.
type origin struct {
	name     string
	body1K   []byte
	poolBody []byte
	served   atomic.Uint64
}

func newOrigin(name string) *origin {
	return &origin{name: strings.TrimSpace(name), body1K: makeBody(1024), poolBody: []byte("web serving v1")}
}

func makeBody(n int) []byte {
	const pat = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-_\n"
	b := make([]byte, n)
	for i := range b {
		b[i] = pat[i%len(pat)]
	}
	return b
}

func (o *origin) handle(ctx *fasthttp.RequestCtx) {
	ctx.Response.Header.Set("X-Backend", o.name)
	if !ctx.IsGet() && !ctx.IsHead() {
		ctx.SetStatusCode(fasthttp.StatusMethodNotAllowed)
		return
	}
	switch string(ctx.Path()) { // the compiler does not allocate for string(bytes) in a switch
	case "/":
		o.served.Add(1)
		ctx.SetContentType("text/plain")
		ctx.SetBody(o.body1K)
	case "/pool":
		o.served.Add(1)
		ctx.SetContentType("text/plain")
		ctx.SetBody(o.poolBody)
	case "/204":
		o.served.Add(1)
		ctx.SetStatusCode(fasthttp.StatusNoContent)
	case "/stats":
		ctx.SetContentType("text/plain")
		ctx.SetBodyString(o.name + " " + strconv.FormatUint(o.served.Load(), 10) + "\n")
	default:
		ctx.SetStatusCode(fasthttp.StatusNotFound)
		ctx.SetBodyString("not found\n")
	}
}

func main() {
	fs := flag.NewFlagSet("bench-backend", flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:18081", "listen address (host:port); must be a loopback address")
	name := fs.String("name", "", "instance name reported by /stats and the X-Backend header (default: the address)")
	_ = fs.Parse(os.Args[1:])
	if err := run(*addr, *name); err != nil {
		fmt.Fprintln(os.Stderr, "bench-backend:", err)
		os.Exit(1)
	}
}

func run(addr, name string) error {
	if err := loopback.Check(addr); err != nil {
		return err
	}
	if name == "" {
		name = addr
	}
	o := newOrigin(name)
	srv := &fasthttp.Server{
		Handler:                       o.handle,
		Name:                          "bench-backend",
		DisableHeaderNamesNormalizing: true,
	}
	ln, err := net.Listen("tcp4", addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", addr, err)
	}
	fmt.Fprintf(os.Stderr, "bench-backend %s listening on %s\n", o.name, ln.Addr())
	if err := srv.Serve(ln); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}
