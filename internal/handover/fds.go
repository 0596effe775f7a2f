package handover

import (
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
)

// takeListener makes the inherited descriptor fd the listener name. It first checks that fd is
// a listening TCP socket and leaves anything else alone: when the environment names more
// descriptors than were passed, fd may be one this process opened since (the runtime's poller),
// and closing that would break the process.
func takeListener(fd int, name string) (*net.TCPListener, error) {
	if err := checkListening(fd); err != nil {
		return nil, fmt.Errorf("%s listener (descriptor %d): %w", name, fd, err)
	}
	syscall.CloseOnExec(fd)
	f := os.NewFile(uintptr(fd), name)
	ln, err := net.FileListener(f) // a duplicate, close-on-exec; fd itself is closed below
	_ = f.Close()
	if err != nil {
		return nil, fmt.Errorf("%s listener (descriptor %d): %w", name, fd, err)
	}
	tcp, ok := ln.(*net.TCPListener)
	if !ok {
		_ = ln.Close()
		return nil, fmt.Errorf("%s listener (descriptor %d): a %T, not a TCP listener", name, fd, ln)
	}
	return tcp, nil
}

// checkListening says why fd is not a listening TCP socket, or nil when it is one.
func checkListening(fd int) error {
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return fmt.Errorf("not an open descriptor: %w", err)
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFSOCK {
		return errors.New("not a socket")
	}
	// Go listens with MPTCP where the kernel has it; it is TCP to every client that does not
	// ask for more.
	if proto, err := syscall.GetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_PROTOCOL); err != nil || (proto != syscall.IPPROTO_TCP && proto != ipprotoMPTCP) {
		return errors.New("not a TCP socket")
	}
	if listening, err := syscall.GetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_ACCEPTCONN); err != nil || listening != 1 {
		return errors.New("a TCP socket that is not listening")
	}
	return nil
}

// ipprotoMPTCP is IPPROTO_MPTCP, which package syscall lacks.
const ipprotoMPTCP = 262

// takePipe makes the inherited descriptor fd the old process's readiness pipe, once it has
// checked that fd is a pipe (for the reason takeListener gives).
func takePipe(fd int) (*os.File, error) {
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("readiness pipe (descriptor %d): not an open descriptor: %w", fd, err)
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFIFO {
		return nil, fmt.Errorf("readiness pipe (descriptor %d): not a pipe", fd)
	}
	syscall.CloseOnExec(fd)
	return os.NewFile(uintptr(fd), "readiness pipe"), nil
}

// dupListener returns a duplicate of ln's descriptor for a child's ExtraFiles. It must not come
// from ln.File(): os/exec calls Fd on every file it passes, and Fd on a file that the net
// package made puts the descriptor in blocking mode — a mode the duplicate shares with ln
// (O_NONBLOCK belongs to the open socket, not to the descriptor), so after an upgrade that
// failed before the child took the socket over, the old process would accept in blocking mode:
// an Accept that blocks a thread and that closing the listener does not end. A file that
// os.NewFile made from a non-blocking descriptor keeps it non-blocking through Fd.
// The duplicate is close-on-exec, so no other child started meanwhile inherits it.
func dupListener(ln *net.TCPListener, name string) (*os.File, error) {
	rc, err := ln.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("%s listener: %w", name, err)
	}
	var dup uintptr
	var errno syscall.Errno
	if err := rc.Control(func(fd uintptr) {
		dup, _, errno = syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_DUPFD_CLOEXEC, 0)
	}); err != nil {
		return nil, fmt.Errorf("%s listener: %w", name, err)
	}
	if errno != 0 {
		return nil, fmt.Errorf("%s listener: duplicate its descriptor: %w", name, errno)
	}
	return os.NewFile(dup, name), nil
}
