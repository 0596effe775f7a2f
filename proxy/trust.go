package proxy

import (
	"net"
	"net/netip"
	"slices"
	"sync/atomic"

	"github.com/valyala/fasthttp"

	"pollbal/configs"
)

// trustedNets is proxy.trusted_proxies of one configuration, ready for lookups: IPv4 and IPv6
// prefixes apart, each list sorted by address with the prefixes that another one already
// covers dropped, so the list is disjoint and a lookup is one binary search that allocates
// nothing. It is immutable once built and safe for concurrent use.
type trustedNets struct {
	cfg    *configs.Config // the configuration it was built from
	v4, v6 []netip.Prefix
}

func newTrustedNets(cfg *configs.Config) *trustedNets {
	t := &trustedNets{cfg: cfg}
	for _, p := range cfg.Proxy.TrustedProxies {
		p = p.Masked() // validated configs hold masked prefixes; a hand-built one may not
		if !p.IsValid() {
			continue
		}
		if p.Addr().Is4() {
			t.v4 = append(t.v4, p)
		} else {
			t.v6 = append(t.v6, p)
		}
	}
	t.v4, t.v6 = disjoint(t.v4), disjoint(t.v6)
	return t
}

// disjoint sorts prefixes of one family by address (the wider of two at the same address
// first) and drops those inside an earlier one. Two prefixes are either disjoint or nested, so
// after sorting a prefix can only overlap the last one kept.
func disjoint(ps []netip.Prefix) []netip.Prefix {
	slices.SortFunc(ps, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits()
	})
	out := ps[:0]
	for _, p := range ps {
		if n := len(out); n > 0 && out[n-1].Contains(p.Addr()) {
			continue
		}
		out = append(out, p)
	}
	return out
}

// contains reports whether a (unmapped: IPv4 clients are IPv4 even on an IPv6 socket) is in a
// trusted network.
func (t *trustedNets) contains(a netip.Addr) bool {
	ps := t.v6
	if a.Is4() {
		ps = t.v4
	}
	// The last prefix starting at or before a is the only one that can hold it.
	lo, hi := 0, len(ps)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if ps[mid].Addr().Compare(a) <= 0 {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo > 0 && ps[lo-1].Contains(a)
}

// trustCache holds the trustedNets of the configuration requests last saw. A reload installs a
// new *configs.Config; the first request that sees it builds the new set (racing builders build
// equal sets, and either may stay). It is safe for concurrent use.
type trustCache struct {
	cur atomic.Pointer[trustedNets]
}

func (c *trustCache) get(cfg *configs.Config) *trustedNets {
	if t := c.cur.Load(); t != nil && t.cfg == cfg {
		return t
	}
	t := newTrustedNets(cfg)
	c.cur.Store(t)
	return t
}

// clientIP is who a client is to the headers pollbal sets: its IP (clientAddr; tcp is
// clientAddr's ok) and, for X-Forwarded-For and X-Real-IP, that IP as text, or "unknown" when
// the client is not on TCP. A client connection works it out once, when accepted (track); text
// is then read-only.
type clientIP struct {
	ip   netip.Addr
	tcp  bool
	text []byte
}

func newClientIP(addr net.Addr) clientIP {
	ip, tcp := clientAddr(addr)
	return clientIP{ip: ip, tcp: tcp, text: appendClientIP(nil, ip, tcp)}
}

// requestClientIP is the clientIP of the request's connection: the one worked out when it was
// accepted, or (a connection pollbal's listener did not wrap, in tests) one worked out now with
// its text in buf.
func requestClientIP(ctx *fasthttp.RequestCtx, buf *[64]byte) clientIP {
	if c := trackedConn(ctx.Conn()); c != nil {
		return c.client
	}
	ip, tcp := clientAddr(ctx.RemoteAddr())
	return clientIP{ip: ip, tcp: tcp, text: appendClientIP(buf[:0], ip, tcp)}
}

func appendClientIP(dst []byte, ip netip.Addr, tcp bool) []byte {
	if !tcp {
		return append(dst, "unknown"...)
	}
	return ip.AppendTo(dst)
}

// clientAddr is the IP of a TCP client address, IPv4-mapped IPv6 unmapped; ok is false for
// anything else (an in-memory connection).
func clientAddr(addr net.Addr) (ip netip.Addr, ok bool) {
	if tcp, isTCP := addr.(*net.TCPAddr); isTCP {
		if ip, ok := netip.AddrFromSlice(tcp.IP); ok {
			return ip.Unmap(), true
		}
	}
	return netip.Addr{}, false
}
