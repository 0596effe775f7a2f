//go:build !linux

package clientconn

import "syscall"

// peerClosed is socketGone off Linux.
func peerClosed(sc syscall.Conn) bool { return SocketGone(sc) }
