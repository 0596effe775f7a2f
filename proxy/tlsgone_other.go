//go:build !linux

package proxy

import "syscall"

// peerClosed is socketGone off Linux.
func peerClosed(sc syscall.Conn) bool { return SocketGone(sc) }
