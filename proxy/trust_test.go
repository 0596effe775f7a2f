package proxy

import (
	"net"
	"net/netip"
	"slices"
	"testing"

	"pollbal/configs"
	"pollbal/internal/testproc"
	"pollbal/proxy/clientconn"
)

func prefixes(ss ...string) []netip.Prefix {
	ps := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		ps[i] = netip.MustParsePrefix(s)
	}
	return ps
}

func TestTrustedNets(t *testing.T) {
	nets := newTrustedNets(&configs.Config{Proxy: configs.Proxy{TrustedProxies: prefixes(
		"192.168.1.7/32", "10.0.0.0/8", "10.1.0.0/16", "10.2.3.4/32", "172.16.0.0/12", "192.168.1.7/32",
		"2001:db8::/32", "2001:db8:1::/48", "::1/128", "fd00::/8")}})
	if want := prefixes("10.0.0.0/8", "172.16.0.0/12", "192.168.1.7/32"); !slices.Equal(nets.v4, want) {
		t.Errorf("v4 = %v, want %v (sorted, nested and repeated ones dropped)", nets.v4, want)
	}
	if want := prefixes("::1/128", "2001:db8::/32", "fd00::/8"); !slices.Equal(nets.v6, want) {
		t.Errorf("v6 = %v, want %v", nets.v6, want)
	}
	tests := []struct {
		name string
		addr string
		want bool
	}{
		{name: "inside a /8", addr: "10.200.3.4", want: true},
		{name: "first address of a /8", addr: "10.0.0.0", want: true},
		{name: "last address of a /8", addr: "10.255.255.255", want: true},
		{name: "just past a /8", addr: "11.0.0.0"},
		{name: "just before a /8", addr: "9.255.255.255"},
		{name: "inside a /12", addr: "172.31.255.1", want: true},
		{name: "past a /12", addr: "172.32.0.0"},
		{name: "the single address", addr: "192.168.1.7", want: true},
		{name: "its neighbour", addr: "192.168.1.8"},
		{name: "below every prefix", addr: "1.2.3.4"},
		{name: "above every prefix", addr: "255.255.255.255"},
		{name: "loopback not trusted", addr: "127.0.0.1"},
		{name: "IPv6 inside", addr: "2001:db8:ffff::1", want: true},
		{name: "IPv6 loopback", addr: "::1", want: true},
		{name: "IPv6 ULA", addr: "fd12::1", want: true},
		{name: "IPv6 outside", addr: "2001:db9::1"},
		{name: "IPv6 below every prefix", addr: "::"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := nets.contains(netip.MustParseAddr(tt.addr)); got != tt.want {
				t.Errorf("contains(%s) = %v, want %v", tt.addr, got, tt.want)
			}
		})
	}
	empty := newTrustedNets(&configs.Config{})
	if empty.contains(netip.MustParseAddr("127.0.0.1")) || empty.contains(netip.MustParseAddr("::1")) {
		t.Error("an empty trusted_proxies trusts an address")
	}
}

// TestTrustCache: the set follows the configuration a request sees.
func TestTrustCache(t *testing.T) {
	var c trustCache
	a := &configs.Config{Proxy: configs.Proxy{TrustedProxies: prefixes("127.0.0.1/32")}}
	b := &configs.Config{}
	ip := netip.MustParseAddr("127.0.0.1")
	if !c.get(a).contains(ip) {
		t.Fatal("not trusted under the first configuration")
	}
	if first := c.get(a); first != c.get(a) {
		t.Error("the set was rebuilt for the same configuration")
	}
	if c.get(b).contains(ip) {
		t.Error("still trusted after a reload emptied trusted_proxies")
	}
}

func TestClientAddr(t *testing.T) {
	tests := []struct {
		name   string
		addr   net.Addr
		want   string
		wantOK bool
	}{
		{name: "IPv4", addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}, want: "127.0.0.1", wantOK: true},
		{name: "IPv4-mapped IPv6 socket", addr: &net.TCPAddr{IP: net.ParseIP("::ffff:10.1.2.3"), Port: 1}, want: "10.1.2.3", wantOK: true},
		{name: "IPv6", addr: &net.TCPAddr{IP: net.ParseIP("2001:db8::1"), Port: 1}, want: "2001:db8::1", wantOK: true},
		{name: "not TCP", addr: &net.UnixAddr{Name: "x", Net: "unix"}},
		{name: "nil", addr: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := clientconn.Addr(tt.addr)
			if ok != tt.wantOK || (ok && got.String() != tt.want) {
				t.Errorf("clientAddr(%v) = %v, %v; want %s, %v", tt.addr, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

// TestTrustAllocs: deciding trust and rewriting a trusted proxy's headers allocate nothing.
func TestTrustAllocs(t *testing.T) {
	if testproc.Race {
		t.Skip("allocation counts are not meaningful under -race")
	}
	nets := newTrustedNets(&configs.Config{Proxy: configs.Proxy{TrustedProxies: prefixes(
		"10.0.0.0/8", "127.0.0.0/8", "192.168.0.0/16", "2001:db8::/32")}})
	ip := netip.MustParseAddr("127.0.0.1")
	if n := testing.AllocsPerRun(100, func() { nets.contains(ip) }); n != 0 {
		t.Errorf("contains allocates %.2f times", n)
	}
	h := newHandlerCall()
	h.tmpl.Header.Add("X-Forwarded-For", "203.0.113.9")
	h.tmpl.Header.Add("X-Real-IP", "203.0.113.9")
	h.tmpl.Header.Add("X-Forwarded-Proto", "https")
	h.tmpl.Header.Add("Forwarded", "for=203.0.113.9")
	for _, set := range []*trustedNets{nets, newTrustedNets(&configs.Config{})} {
		run := func() {
			h.tmpl.CopyTo(&h.ctx.Request)
			prepareRequest(&h.ctx, set)
		}
		run()
		if n := testing.AllocsPerRun(200, run); n != 0 {
			t.Errorf("prepareRequest (trusted: %v) allocates %.2f times", set.contains(ip), n)
		}
	}
}
