// Package loopback keeps the benchmark programs on 127.0.0.1: they refuse any address that is
// not on the loopback interface.
package loopback

import (
	"fmt"
	"net"
)

// Check rejects any host:port address that is not on the loopback interface.
func Check(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("bad address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("refusing non-loopback address %q", addr)
	}
	return nil
}
