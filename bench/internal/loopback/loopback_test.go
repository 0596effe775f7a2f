package loopback

import (
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	tests := []struct {
		name    string
		addr    string
		wantErr string
	}{
		{name: "ipv4 loopback", addr: "127.0.0.1:18081"},
		{name: "localhost", addr: "localhost:18081"},
		{name: "all interfaces", addr: ":18081", wantErr: "non-loopback"},
		{name: "public address", addr: "192.0.2.1:80", wantErr: "non-loopback"},
		{name: "no port", addr: "127.0.0.1", wantErr: "bad address"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Check(tc.addr)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Check(%q) = %v, want nil", tc.addr, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Check(%q) = %v, want an error containing %q", tc.addr, err, tc.wantErr)
			}
		})
	}
}
