package proxy

import (
	"net/netip"
	"slices"
	"sync/atomic"
	"unsafe"

	"github.com/valyala/fasthttp"

	"pollbal/configs"
	"pollbal/proxy/clientconn"
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

// requestClientIP is the clientIP of the request's connection: the one worked out when it was
// accepted, or (a connection pollbal's listener did not wrap, in tests) one worked out now with
// its text in buf.
func requestClientIP(ctx *fasthttp.RequestCtx, buf *[64]byte) clientconn.IP {
	if c := clientconn.Tracked(ctx.Conn()); c != nil {
		return c.Client()
	}
	ip, tcp := clientconn.Addr(ctx.RemoteAddr())
	return clientconn.IP{IP: ip, TCP: tcp, Text: clientconn.AppendIP(buf[:0], ip, tcp)}
}

// maxForwardedHops bounds the X-Forwarded-For entries forwardedClient looks at, from the right:
// a chain of trusted proxies longer than this is not a deployment but a client's invention.
const maxForwardedHops = 32

// forwardedClient is who a client is for the access log: peer, the address that connected,
// unless peer is a trusted proxy; then the address its X-Forwarded-For (xff: every line, in
// order, comma-joined) names last that is not itself trusted, walking from the right over
// trusted proxies that passed the request on (NGINX's real_ip_recursive, Caddy's client_ip).
// An entry that is not an address ends the walk at the hop after it: only the proxies trusted
// so far vouch for what they appended. An entry may carry a port ("192.0.2.1:4711",
// "[2001:db8::1]:4711"), which is ignored. scratch holds the entry being parsed, so that xff
// stays where it is (the request's header, or the caller's stack).
func forwardedClient(peer netip.Addr, xff []byte, trusted *trustedNets, scratch *[64]byte) netip.Addr {
	client := peer
	for hops := 0; client.IsValid() && trusted.contains(client) && hops < maxForwardedHops; hops++ {
		var entry []byte
		entry, xff = lastEntry(xff)
		if len(entry) > len(scratch) {
			break // no address is that long
		}
		ip, ok := parseForwardedAddr(scratch[:copy(scratch[:], entry)])
		if !ok {
			break
		}
		client = ip
	}
	return client
}

// lastEntry splits the last comma-separated entry, trimmed of spaces and tabs, off a list.
func lastEntry(list []byte) (last, rest []byte) {
	i := len(list) - 1
	for i >= 0 && list[i] != ',' {
		i--
	}
	last, rest = list[i+1:], list[:max(i, 0)]
	for len(last) > 0 && (last[0] == ' ' || last[0] == '\t') {
		last = last[1:]
	}
	for len(last) > 0 && (last[len(last)-1] == ' ' || last[len(last)-1] == '\t') {
		last = last[:len(last)-1]
	}
	return last, rest
}

// parseForwardedAddr reads an X-Forwarded-For entry: an IP address, with or without a port,
// IPv4-mapped IPv6 unmapped. It allocates only for an entry that is not an address.
func parseForwardedAddr(entry []byte) (netip.Addr, bool) {
	if len(entry) == 0 {
		return netip.Addr{}, false
	}
	s := viewString(entry) // netip keeps no reference to it
	if ip, err := netip.ParseAddr(s); err == nil {
		return ip.Unmap(), true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap(), true
	}
	return netip.Addr{}, false
}

// viewString is b as a string without a copy, for calls that only read their argument and
// keep nothing of it; b must not change while the string is in use.
func viewString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
