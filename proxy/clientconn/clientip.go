package clientconn

import (
	"net"
	"net/netip"
)

// IP is who a client is to the headers pollbal sets: its IP (Addr; TCP is
// Addr's ok) and, for X-Forwarded-For and X-Real-IP, that IP as text, or "unknown" when
// the client is not on TCP. A client connection works it out once, when accepted (track); Text
// is then read-only.
type IP struct {
	IP   netip.Addr
	TCP  bool
	Text []byte
}

// NewIP works out the IP of a connection from addr.
func NewIP(addr net.Addr) IP {
	ip, tcp := Addr(addr)
	return IP{IP: ip, TCP: tcp, Text: AppendIP(nil, ip, tcp)}
}

// AppendIP appends the text of ip (tcp: Addr's ok) to dst.
func AppendIP(dst []byte, ip netip.Addr, tcp bool) []byte {
	if !tcp {
		return append(dst, "unknown"...)
	}
	return ip.AppendTo(dst)
}

// Addr is the IP of a TCP client address, IPv4-mapped IPv6 unmapped; ok is false for
// anything else (an in-memory connection).
func Addr(addr net.Addr) (ip netip.Addr, ok bool) {
	if tcp, isTCP := addr.(*net.TCPAddr); isTCP {
		if ip, ok := netip.AddrFromSlice(tcp.IP); ok {
			return ip.Unmap(), true
		}
	}
	return netip.Addr{}, false
}
