package proxy

import (
	"net"
	"net/netip"
)

// ClientIP is who a client is to the headers pollbal sets: its IP (ClientAddr; TCP is
// ClientAddr's ok) and, for X-Forwarded-For and X-Real-IP, that IP as text, or "unknown" when
// the client is not on TCP. A client connection works it out once, when accepted (track); Text
// is then read-only.
type ClientIP struct {
	IP   netip.Addr
	TCP  bool
	Text []byte
}

// NewClientIP works out the ClientIP of a connection from addr.
func NewClientIP(addr net.Addr) ClientIP {
	ip, tcp := ClientAddr(addr)
	return ClientIP{IP: ip, TCP: tcp, Text: AppendClientIP(nil, ip, tcp)}
}

// AppendClientIP appends the text of ip (tcp: ClientAddr's ok) to dst.
func AppendClientIP(dst []byte, ip netip.Addr, tcp bool) []byte {
	if !tcp {
		return append(dst, "unknown"...)
	}
	return ip.AppendTo(dst)
}

// ClientAddr is the IP of a TCP client address, IPv4-mapped IPv6 unmapped; ok is false for
// anything else (an in-memory connection).
func ClientAddr(addr net.Addr) (ip netip.Addr, ok bool) {
	if tcp, isTCP := addr.(*net.TCPAddr); isTCP {
		if ip, ok := netip.AddrFromSlice(tcp.IP); ok {
			return ip.Unmap(), true
		}
	}
	return netip.Addr{}, false
}
