package configs

import (
	"net/netip"
	"testing"
)

func TestParseTrustedProxy(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    string // the prefix; "" = an error
		wantErr string
	}{
		{name: "IPv4 CIDR", in: "10.0.0.0/8", want: "10.0.0.0/8"},
		{name: "IPv4 address", in: "192.168.1.7", want: "192.168.1.7/32"},
		{name: "IPv4 /32", in: "127.0.0.1/32", want: "127.0.0.1/32"},
		{name: "everything IPv4", in: "0.0.0.0/0", want: "0.0.0.0/0"},
		{name: "IPv6 CIDR", in: "2001:db8::/32", want: "2001:db8::/32"},
		{name: "IPv6 address", in: "::1", want: "::1/128"},
		{name: "IPv4-mapped address is IPv4", in: "::ffff:192.0.2.1", want: "192.0.2.1/32"},
		{name: "IPv4-mapped CIDR is IPv4", in: "::ffff:10.0.0.0/104", want: "10.0.0.0/8"},
		{name: "host bits set", in: "10.1.2.3/16",
			wantErr: `"10.1.2.3/16" has address bits past its /16: write 10.1.0.0/16 for the network, or 10.1.2.3/32 for the one address`},
		{name: "IPv6 host bits set", in: "2001:db8::1/64",
			wantErr: `"2001:db8::1/64" has address bits past its /64: write 2001:db8::/64 for the network, or 2001:db8::1/128 for the one address`},
		{name: "zone", in: "fe80::1%eth0", wantErr: `"fe80::1%eth0" has an IPv6 zone: trusted proxies are matched by address alone`},
		{name: "zone in a CIDR", in: "fe80::%eth0/64", wantErr: `"fe80::%eth0/64" has an IPv6 zone: trusted proxies are matched by address alone`},
		{name: "length out of range", in: "10.0.0.0/33", wantErr: `"10.0.0.0/33" is not a CIDR such as 10.0.0.0/8 or an IP address`},
		{name: "leading zero", in: "010.0.0.0/8", wantErr: `"010.0.0.0/8" is not a CIDR such as 10.0.0.0/8 or an IP address`},
		{name: "host name", in: "proxy.local", wantErr: `"proxy.local" is not a CIDR such as 10.0.0.0/8 or an IP address`},
		{name: "space", in: " 10.0.0.0/8", wantErr: `" 10.0.0.0/8" is not a CIDR such as 10.0.0.0/8 or an IP address`},
		{name: "empty", in: "", wantErr: `"" is not a CIDR such as 10.0.0.0/8 or an IP address`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseTrustedProxy(tt.in)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("ParseTrustedProxy(%q) = %v, %v; want error %q", tt.in, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != netip.MustParsePrefix(tt.want) {
				t.Fatalf("ParseTrustedProxy(%q) = %v, %v; want %s", tt.in, got, err, tt.want)
			}
		})
	}
}
