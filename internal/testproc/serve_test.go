package testproc

import (
	"bufio"
	"io"
	"net"
	"testing"
	"time"
)

// TestServeLocal: each connection gets serve in its own goroutine (two at once here), the
// connection is closed when serve returns, and the listener is closed when the test ends.
func TestServeLocal(t *testing.T) {
	var addr string
	t.Run("serve", func(t *testing.T) {
		addr = ServeLocal(t, func(c net.Conn) {
			line, err := bufio.NewReader(c).ReadString('\n')
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, "echo "+line)
		})
		first := dial(t, addr)
		second := dial(t, addr) // served while the first still waits for its line
		for i, c := range []net.Conn{second, first} {
			if _, err := io.WriteString(c, "hi\n"); err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(c) // to EOF: serve returned and the connection was closed
			if err != nil || string(b) != "echo hi\n" {
				t.Fatalf("connection %d read %q, %v; want the echo, then EOF", i, b, err)
			}
		}
	})
	if c, err := net.DialTimeout("tcp4", addr, time.Second); err == nil {
		c.Close()
		t.Fatalf("%s still accepts connections after the test that served it ended", addr)
	}
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp4", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if err := c.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	return c
}
