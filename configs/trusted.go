package configs

import (
	"fmt"
	"net/netip"
)

// ParseTrustedProxy parses one proxy.trusted_proxies entry: a CIDR, or a single address (a
// one-address prefix). It is strict where leniency would trust more than was written: a CIDR
// with address bits past its length ("10.1.2.3/16" — meant as /16, or as the one address?) and
// an IPv6 zone (client addresses carry none) are errors, not silently masked or dropped. IPv4
// written in IPv4-mapped IPv6 form is stored as IPv4, the form client addresses are compared in.
func ParseTrustedProxy(s string) (netip.Prefix, error) {
	if pfx, err := netip.ParsePrefix(s); err == nil {
		if pfx != pfx.Masked() {
			return netip.Prefix{}, fmt.Errorf("%q has address bits past its /%d: write %s for the network, or %s for the one address",
				s, pfx.Bits(), pfx.Masked(), netip.PrefixFrom(pfx.Addr(), pfx.Addr().BitLen()))
		}
		if a := pfx.Addr(); a.Is4In6() && pfx.Bits() >= 96 {
			return netip.PrefixFrom(a.Unmap(), pfx.Bits()-96), nil
		}
		return pfx, nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not a CIDR such as 10.0.0.0/8 or an IP address", s)
	}
	if a.Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("%q has an IPv6 zone: trusted proxies are matched by address alone", s)
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}
