//go:build !linux

package proxy

import "net"

// socketPeek is not implemented off Linux: a connection is never found readable, so bytes a
// backend sends after a response that has no body are noticed only when they arrive before the
// response is read to its end.
type socketPeek struct{}

func (*socketPeek) init(net.Conn) {}

func (*socketPeek) readable() bool { return false }
