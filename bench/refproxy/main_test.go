package main

import (
	"net"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// serve runs h on a fresh 127.0.0.1 listener until the test ends and returns its address.
func serve(t *testing.T, h fasthttp.RequestHandler) string {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: h}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		_ = srv.Shutdown()
		<-done
	})
	return ln.Addr().String()
}

func TestProxyForwardsAndStripsHopHeaders(t *testing.T) {
	backend := serve(t, func(ctx *fasthttp.RequestCtx) {
		// Echo what arrived so the test can see which request headers were forwarded.
		ctx.Response.Header.Set("X-Got-Keep-Alive", string(ctx.Request.Header.Peek("Keep-Alive")))
		ctx.Response.Header.Set("X-Got-Custom", string(ctx.Request.Header.Peek("X-Custom")))
		ctx.Response.Header.Set("Keep-Alive", "timeout=5")
		ctx.SetBodyString("hello from " + string(ctx.Path()))
	})
	lb := &fasthttp.LBClient{Clients: []fasthttp.BalancingClient{&fasthttp.HostClient{Addr: backend}}, Timeout: 5 * time.Second}
	proxy := serve(t, newHandler(lb))

	var req fasthttp.Request
	var resp fasthttp.Response
	req.SetRequestURI("http://" + proxy + "/x")
	req.Header.Set("Keep-Alive", "timeout=9")
	req.Header.Set("X-Custom", "kept")
	if err := fasthttp.DoTimeout(&req, &resp, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := string(resp.Body()); got != "hello from /x" {
		t.Fatalf("body = %q", got)
	}
	if got := string(resp.Header.Peek("X-Got-Custom")); got != "kept" {
		t.Fatalf("end-to-end header reached the backend as %q, want kept", got)
	}
	if got := string(resp.Header.Peek("X-Got-Keep-Alive")); got != "" {
		t.Fatalf("hop-by-hop Keep-Alive reached the backend: %q", got)
	}
	if got := string(resp.Header.Peek("Keep-Alive")); got != "" {
		t.Fatalf("hop-by-hop Keep-Alive came back to the client: %q", got)
	}
}

func TestProxyAnswers502WithoutBackend(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	_ = ln.Close() // nothing listens there any more
	lb := &fasthttp.LBClient{Clients: []fasthttp.BalancingClient{&fasthttp.HostClient{Addr: dead}}, Timeout: 2 * time.Second}
	proxy := serve(t, newHandler(lb))
	status, _, err := fasthttp.GetTimeout(nil, "http://"+proxy+"/", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if status != fasthttp.StatusBadGateway {
		t.Fatalf("status = %d, want 502", status)
	}
}
