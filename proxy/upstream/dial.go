package upstream

import (
	"net"
	"time"

	"github.com/valyala/fasthttp"
)

// DialError marks an error that happened while connecting, before any byte of the request was
// written, so that classify can tell it from a failure after sending.
type DialError struct{ Err error }

func (e *DialError) Error() string { return "dial backend: " + e.Err.Error() }
func (e *DialError) Unwrap() error { return e.Err }

// dialBackend dials a backend for the watchdog's dialer: fasthttp's own dialer (IPv4 and IPv6,
// DNS cache), with its errors marked as dial errors.
func dialBackend(addr string, timeout time.Duration) (net.Conn, error) {
	var (
		c   net.Conn
		err error
	)
	if timeout > 0 {
		c, err = fasthttp.DialDualStackTimeout(addr, timeout)
	} else {
		c, err = fasthttp.DialDualStack(addr)
	}
	if err != nil {
		return nil, &DialError{Err: err}
	}
	return c, nil
}
