package proxy

import (
	"unsafe"

	"github.com/valyala/fasthttp"

	"pollbal/protocol"
)

// Header names pollbal sets; the X-Pollbal-* ones and their prefix are the protocol's.
const (
	headerBackend        = protocol.HeaderBackend
	headerPool           = protocol.HeaderPool
	headerReason         = protocol.HeaderReason
	headerRetryAfter     = "Retry-After"
	headerForwardedFor   = "X-Forwarded-For"
	headerForwardedHost  = "X-Forwarded-Host"
	headerForwardedProto = "X-Forwarded-Proto"
	// headerOwnPrefix starts every header name pollbal sets on an answer: a backend's answer
	// loses any it carries (stripResponseHeaders).
	headerOwnPrefix = protocol.HeaderPrefix
)

// Client-identity headers: pollbal sets them from a client it does not trust, and keeps
// them (X-Forwarded-For: appends to it) from a trusted proxy.
const (
	headerRealIP    = "X-Real-IP"
	headerForwarded = "Forwarded" // RFC 7239; pollbal never sets it, only keeps or drops it
)

// forwardedKind tells which client-identity header a name is.
type forwardedKind uint8

const (
	fwdNone forwardedKind = iota
	fwdFor
	fwdHost
	fwdProto
	fwdRealIP
	fwdForwarded
)

// forwardedHeader is the client-identity kind of a header name.
func forwardedHeader(key []byte) forwardedKind { return classifyHeader(key).fwd }

// prepareRequest rewrites a client request for forwarding, in one pass over its headers (two
// when Connection names a custom header): hop-by-hop headers are removed, and the
// client-identity headers are set by who the client is.
//
// From a client outside trusted, every X-Forwarded-For, X-Real-IP, Forwarded,
// X-Forwarded-Host and X-Forwarded-Proto it sent is dropped: anyone can write them, and a
// backend that logs or rate-limits by them must see the address pollbal saw. pollbal sets
// X-Forwarded-For and X-Real-IP to the client IP, X-Forwarded-Host to the Host the client
// asked for and X-Forwarded-Proto to "https" for a request that came over TLS, else "http".
//
// From a trusted proxy, the client IP is appended to its X-Forwarded-For (every line, in
// order, joined into one), and the other headers are kept as sent; those it did not send are
// set as for any client.
//
// The client's keep-alive choice is between it and pollbal: the server has already recorded
// it, and the backend connection is pollbal's to keep.
//
// The same pass judges every header name (names.go): one holding "_" is dropped, and one that
// is not a token makes the request one to refuse: prepareRequest then reports false at once.
// The fields of a trailer section are dropped first (dropTrailers).
//
// It returns what the request asks of an upgrade (upgrade.go): a WebSocket upgrade keeps
// "Connection: Upgrade" and "Upgrade: websocket"; a refused one is to be answered 501.
func prepareRequest(ctx *fasthttp.RequestCtx, trusted *trustedNets) (upgradePlan, bool) {
	h := &ctx.Request.Header
	dropTrailers(h) // a chunked body read whole: its trailer fields would become headers
	var buf [64]byte
	client := requestClientIP(ctx, &buf)
	trust := client.TCP && trusted.contains(client.IP)
	var (
		s    hopSet
		xff  joined
		kept uint8 // 1 << forwardedKind of each header kept as sent
	)
	for k, v := range h.All() {
		switch requestName(k) {
		case nameUnderscore:
			s.add(k)
			continue
		case nameInvalid:
			return upgradeNone, false
		}
		class := classifyHeader(k) // one lookup for both kinds
		s.see(k, v, class.hop, true)
		switch f := class.fwd; {
		case f == fwdNone:
		case f == fwdFor:
			s.add(k) // deleted, then set afresh below
			if trust {
				xff.add(v, ", ")
			}
		case trust:
			kept |= 1 << f
		default:
			s.add(k)
		}
	}
	if s.namesOthers(true) {
		for k := range h.All() {
			if s.seeNamed(k, true) {
				// A trusted proxy's Connection named it: it goes, and pollbal's own replaces it.
				kept &^= 1 << forwardedHeader(k)
			}
		}
	}
	var upgrade upgradePlan
	if s.upgrade {
		upgrade = requestUpgrade(h, s.conn.bytes())
	}
	// Every name below is already in the header's own form (the names s collected were read
	// from it, ours are canonical), so fasthttp need not normalize them again.
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

	ip := client.Text
	xff.add(ip, ", ")
	// Every header of these names was removed above (or is kept, and not set): setting them
	// is adding them, and SetCanonical does it without checking and copying our own valid
	// names as Add and Set do.
	h.SetCanonical(viewBytes(headerForwardedFor), xff.bytes())
	if kept&(1<<fwdRealIP) == 0 {
		h.SetCanonical(viewBytes(headerRealIP), ip)
	}
	if host := ctx.Host(); len(host) > 0 && kept&(1<<fwdHost) == 0 {
		h.SetCanonical(viewBytes(headerForwardedHost), host)
	}
	if kept&(1<<fwdProto) == 0 {
		proto := "http"
		if isTLS(ctx) {
			proto = "https"
		}
		h.SetCanonical(viewBytes(headerForwardedProto), viewBytes(proto))
	}
	if upgrade == upgradeWebSocket {
		h.Set(headerConnection, "Upgrade")
		h.Set(headerUpgrade, "websocket")
	}
	return upgrade, true
}

// viewBytes is s as bytes without a copy, for the fasthttp calls that only read their
// arguments (SetCanonical copies the value and the name into the header); nothing may write
// to it.
func viewBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }
