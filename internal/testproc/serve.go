package testproc

import (
	"net"
	"testing"
)

// Serve accepts connections on ln until the test ends, when ln is closed, and serves each one
// in its own goroutine: serve gets the connection, which is closed when serve returns. It
// returns ln's address. It is the tests' scripted peer on a raw socket: a backend that answers
// in bytes written by hand, or a host that must never be connected to.
func Serve(t testing.TB, ln net.Listener, serve func(c net.Conn)) string {
	t.Helper()
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				serve(c)
			}()
		}
	}()
	return ln.Addr().String()
}

// ServeLocal is Serve on a new TCP listener on 127.0.0.1.
func ServeLocal(t testing.TB, serve func(c net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return Serve(t, ln, serve)
}
