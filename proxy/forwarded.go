package proxy

import (
	"net"
	"net/netip"

	"github.com/valyala/fasthttp"
)

// Header names pollbal sets.
const (
	headerBackend        = "X-Pollbal-Backend"
	headerPool           = "X-Pollbal-Pool"
	headerReason         = "X-Pollbal-Reason"
	headerRetryAfter     = "Retry-After"
	headerForwardedFor   = "X-Forwarded-For"
	headerForwardedHost  = "X-Forwarded-Host"
	headerForwardedProto = "X-Forwarded-Proto"
)

// forwardedKind tells which X-Forwarded-* header a name is.
type forwardedKind uint8

const (
	fwdNone forwardedKind = iota
	fwdFor
	fwdHost
	fwdProto
)

func forwardedHeader(key []byte) forwardedKind {
	switch len(key) {
	case len(headerForwardedFor):
		if equalFold(key, headerForwardedFor) {
			return fwdFor
		}
	case len(headerForwardedHost):
		if equalFold(key, headerForwardedHost) {
			return fwdHost
		}
	case len(headerForwardedProto):
		if equalFold(key, headerForwardedProto) {
			return fwdProto
		}
	}
	return fwdNone
}

// prepareRequest rewrites a client request for forwarding, in one pass over its headers (two
// when Connection names a custom header): hop-by-hop headers are removed; X-Forwarded-For gets
// the client address appended to whatever the client sent (every X-Forwarded-For line, in
// order); X-Forwarded-Host (the Host the client asked for) and X-Forwarded-Proto (pollbal
// listens on plain HTTP) replace the client's. The client's keep-alive choice is between it and
// pollbal: the server has already recorded it, and the backend connection is pollbal's to keep.
func prepareRequest(ctx *fasthttp.RequestCtx) {
	h := &ctx.Request.Header
	var (
		s   hopSet
		xff joined
	)
	for k, v := range h.All() {
		s.see(k, v, true)
		if f := forwardedHeader(k); f != fwdNone {
			s.add(k) // deleted, then set afresh below
			if f == fwdFor {
				xff.add(v, ", ")
			}
		}
	}
	if s.namesOthers(true) {
		for k := range h.All() {
			s.seeNamed(k, true)
		}
	}
	// Every name below is already in the header's own form (the names s collected were read
	// from it, ours are canonical), so fasthttp need not normalize them again; that was a third
	// of this function's cost.
	if wasDisabled := h.DisableNormalizing(); !wasDisabled {
		defer h.EnableNormalizing()
	}
	for i := 0; i < s.len(); i++ {
		h.DelBytes(s.key(i))
	}
	h.ResetConnectionClose()
	if !h.IsHTTP11() {
		// Backend connections are HTTP/1.1 keep-alive, whatever the client spoke.
		h.SetProtocol("HTTP/1.1")
	}

	var ip [64]byte
	xff.add(appendClientIP(ip[:0], ctx.RemoteAddr()), ", ")
	h.AddBytesV(headerForwardedFor, xff.bytes())
	if host := ctx.Host(); len(host) > 0 {
		h.AddBytesV(headerForwardedHost, host)
	}
	h.Add(headerForwardedProto, "http")
}

// appendClientIP appends the IP of a TCP client address, or "unknown" for anything else (an
// in-memory connection).
func appendClientIP(b []byte, addr net.Addr) []byte {
	if tcp, ok := addr.(*net.TCPAddr); ok {
		if ip, ok := netip.AddrFromSlice(tcp.IP); ok {
			return ip.Unmap().AppendTo(b)
		}
	}
	return append(b, "unknown"...)
}
