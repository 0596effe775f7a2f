//go:build !linux

package clientconn

import "syscall"

// socketGone is not implemented off Linux: a client that goes away is noticed when its
// response is written.
func SocketGone(syscall.Conn) bool { return false }
