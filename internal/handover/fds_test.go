package handover

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// rawFD returns a duplicate of c's descriptor that the test owns, closed at cleanup unless
// the test hands it on (taken).
func rawFD(t *testing.T, c syscall.Conn) (fd int, taken func()) {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var derr error
	if err := rc.Control(func(s uintptr) { fd, derr = syscall.Dup(int(s)) }); err != nil || derr != nil {
		t.Fatal(err, derr)
	}
	owned := true
	t.Cleanup(func() {
		if owned {
			_ = syscall.Close(fd)
		}
	})
	return fd, func() { owned = false }
}

// TestTakeListenerChecksFirst: a descriptor that is not a listening TCP socket is refused and
// left open (it may be one the process opened itself); a listening one becomes the listener,
// and the inherited descriptor itself is closed.
func TestTakeListenerChecksFirst(t *testing.T) {
	file, err := os.Create(filepath.Join(t.TempDir(), "file"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	tcp := listenLocal(t)
	conn, err := net.Dial("tcp", tcp.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	unix, err := net.Listen("unix", filepath.Join(t.TempDir(), "sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close()

	for _, tc := range []struct {
		name string
		c    syscall.Conn
		err  string
	}{
		{"regular file", file, "not a socket"},
		{"pipe", r, "not a socket"},
		{"UDP socket", udp.(*net.UDPConn), "not a TCP socket"},
		{"unix listener", unix.(*net.UnixListener), "not a TCP socket"},
		{"connected TCP socket", conn.(*net.TCPConn), "a TCP socket that is not listening"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fd, _ := rawFD(t, tc.c)
			_, err := takeListener(fd, Proxy)
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("takeListener: %v, want an error containing %q", err, tc.err)
			}
			var st syscall.Stat_t
			if err := syscall.Fstat(fd, &st); err != nil {
				t.Errorf("the refused descriptor was closed: %v", err)
			}
		})
	}

	t.Run("closed descriptor", func(t *testing.T) {
		fd, taken := rawFD(t, tcp.(*net.TCPListener))
		taken()
		_ = syscall.Close(fd)
		if _, err := takeListener(fd, Proxy); err == nil || !strings.Contains(err.Error(), "not an open descriptor") {
			t.Fatalf("takeListener on a closed descriptor: %v", err)
		}
	})
	t.Run("listening TCP socket", func(t *testing.T) {
		fd, taken := rawFD(t, tcp.(*net.TCPListener))
		ln, err := takeListener(fd, Proxy)
		if err != nil {
			t.Fatal(err)
		}
		taken()
		defer ln.Close()
		if ln.Addr().String() != tcp.Addr().String() {
			t.Errorf("took %s, want %s", ln.Addr(), tcp.Addr())
		}
		var st syscall.Stat_t
		if err := syscall.Fstat(fd, &st); err == nil {
			t.Errorf("descriptor %d is still open after it was taken (the listener holds a duplicate)", fd)
		}
	})
}

// TestTakePipeChecksFirst: the readiness descriptor must be a pipe.
func TestTakePipeChecksFirst(t *testing.T) {
	ln := listenLocal(t)
	fd, _ := rawFD(t, ln.(*net.TCPListener))
	if _, err := takePipe(fd); err == nil || !strings.Contains(err.Error(), "not a pipe") {
		t.Errorf("takePipe on a socket: %v", err)
	}
}
