package poller

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/valyala/fasthttp"

	"pollbal/protocol"
)

// client is one target's keep-alive HTTP client and the body limit it was built with.
type client struct {
	hc        *fasthttp.HostClient
	transport *transport
	maxBody   int
}

// newClient builds the HostClient of one target. Checks of a target never overlap, so one
// connection is enough; the second covers a connection that is still being torn down. rt nil
// is the real transport; tests pass one that answers without sockets.
func newClient(address string, maxBody int, bufs *buffers, rt fasthttp.RoundTripper) *client {
	tr := &transport{buffers: bufs}
	if rt == nil {
		rt = tr
	}
	return &client{
		maxBody:   maxBody,
		transport: tr,
		hc: &fasthttp.HostClient{
			Transport:                rt,
			Addr:                     address,
			MaxConns:                 2,
			MaxResponseBodySize:      maxBody,
			NoDefaultUserAgentHeader: true,
			DisablePathNormalizing:   true,
			// One retry covers a keep-alive connection that the backend closed while idle.
			MaxIdemponentCallAttempts: 2,
			DialTimeout: func(addr string, timeout time.Duration) (net.Conn, error) {
				return (&net.Dialer{Timeout: timeout}).Dial("tcp", addr)
			},
		},
	}
}

// request fills req with GET /pool for address, with the headers docs/protocol.md lists.
func request(req *fasthttp.Request, address, userAgent, site string) {
	req.Header.SetMethod(fasthttp.MethodGet)
	req.SetRequestURI(protocol.PathPool)
	req.Header.SetHost(address)
	req.Header.Set("Cache-Control", "no-cache")
	req.Header.SetUserAgent(userAgent)
	req.Header.Set(protocol.HeaderSite, site)
}

// check performs one GET /pool with c and classifies what came back. prev and prevBody are the
// target's last good answer and its body: an unchanged body reuses the parsed reports, which
// saves the parse and the allocations. It returns the body to keep for the next check (prevBody's
// buffer is reused). c must not be used by another check at the same time.
func check(c *client, address, userAgent, site string, timeout time.Duration, prevBody []byte, prev []protocol.Report) (outcome, []byte) {
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	request(req, address, userAgent, site)

	start := time.Now()
	c.transport.deadline = start.Add(timeout)
	err := c.hc.DoTimeout(req, resp, timeout)
	o := outcome{duration: time.Since(start)}
	if err != nil {
		o.reason, o.result = classify(err, timeout, c.maxBody)
		return o, prevBody
	}
	if code := resp.StatusCode(); code != fasthttp.StatusOK {
		o.reason, o.result = fmt.Sprintf("status %d", code), resultError
		return o, prevBody
	}
	body := resp.Body()
	if prev != nil && bytes.Equal(body, prevBody) && len(body) <= c.maxBody {
		o.reports, o.result = prev, resultOK
		o.load, o.badLoad = readLoad(&resp.Header)
		return o, prevBody
	}
	reports, err := protocol.ParsePool(body, c.maxBody)
	if err != nil {
		o.reason, o.result = err.Error(), resultInvalid
		return o, prevBody
	}
	o.reports, o.result = reports, resultOK
	o.load, o.badLoad = readLoad(&resp.Header)
	return o, append(prevBody[:0], body...)
}

// readLoad reads a good answer's X-Pool-Load header: the report (its arrival time is set when
// the outcome is recorded), or, for a malformed value, that value quoted and cut short for the
// log. Neither when the header is absent.
func readLoad(h *fasthttp.ResponseHeader) (*protocol.Load, string) {
	v := h.Peek(protocol.HeaderLoad)
	if len(v) == 0 {
		return nil, ""
	}
	n, c, err := protocol.ParseLoad(v)
	if err != nil {
		return nil, capReason(strconv.Quote(string(v)))
	}
	return &protocol.Load{InFlight: n, Capacity: c}, ""
}

// classify turns a failed request into a short reason for the state API and logs, and the
// result label of pollbal_checks_total. It is a pure function.
func classify(err error, timeout time.Duration, maxBody int) (reason, result string) {
	var nerr net.Error
	switch {
	case errors.Is(err, fasthttp.ErrTimeout), errors.Is(err, fasthttp.ErrDialTimeout),
		errors.As(err, &nerr) && nerr.Timeout():
		return "timeout after " + timeout.String(), resultTimeout
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		return fmt.Sprintf("body over %d bytes", maxBody), resultInvalid
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused", resultError
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return "connection reset", resultError
	case errors.Is(err, fasthttp.ErrConnectionClosed):
		return "connection closed before the answer", resultError
	case errors.Is(err, syscall.EHOSTUNREACH):
		return "host unreachable", resultError
	case errors.Is(err, syscall.ENETUNREACH):
		return "network unreachable", resultError
	case errors.Is(err, syscall.EMFILE), errors.Is(err, syscall.ENFILE):
		// pollbal's own limit, not the backend's fault; fasthttp's text would be cut before
		// the words that say so.
		return "too many open files in pollbal (raise its open file limit)", resultError
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return "lookup " + dnsErr.Name + ": " + dnsErr.Err, resultError
	}
	// Anything else is fasthttp's own text, which can quote the backend's bytes at length (and
	// differently on every check): keep a fixed prefix so the reason stays short and stable.
	return capReason(strings.TrimPrefix(err.Error(), "fasthttp: ")), resultError
}

// maxReason bounds a failure reason taken from an error text.
const maxReason = 80

// capReason cuts msg at its first ':' after the start (fasthttp's detail follows it) or at
// maxReason bytes, on a UTF-8 boundary.
func capReason(msg string) string {
	if i := strings.Index(msg, ": "); i > 0 && i <= maxReason {
		msg = msg[:i]
	}
	if len(msg) <= maxReason {
		return msg
	}
	cut := maxReason
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + "…"
}
