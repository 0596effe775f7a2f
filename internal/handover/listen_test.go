package handover

import (
	"errors"
	"net"
	"strings"
	"testing"
)

func TestMatchAddr(t *testing.T) {
	lookup := func(host string) ([]net.IP, error) {
		switch host {
		case "localhost":
			return []net.IP{net.ParseIP("::1"), net.ParseIP("127.0.0.1")}, nil
		case "lb.example":
			return []net.IP{net.ParseIP("192.0.2.7")}, nil
		}
		return nil, errors.New("no such host")
	}
	tcp := func(ip string, port int) *net.TCPAddr { return &net.TCPAddr{IP: net.ParseIP(ip), Port: port} }
	for _, tc := range []struct {
		name string
		got  *net.TCPAddr
		want string
		err  string // in the error; "" for a match
	}{
		{name: "same address", got: tcp("127.0.0.1", 8080), want: "127.0.0.1:8080"},
		{name: "other port", got: tcp("127.0.0.1", 8080), want: "127.0.0.1:8081",
			err: "listens on 127.0.0.1:8080, but the configuration says 127.0.0.1:8081"},
		{name: "other address", got: tcp("127.0.0.1", 8080), want: "127.0.0.2:8080", err: "listens on 127.0.0.1:8080"},
		{name: "configured port 0 takes any", got: tcp("127.0.0.1", 41234), want: "127.0.0.1:0"},
		{name: "empty host: every interface", got: tcp("::", 80), want: ":80"},
		{name: "empty host, socket on one address", got: tcp("127.0.0.1", 80), want: ":80", err: "listens on 127.0.0.1:80"},
		{name: "0.0.0.0 and a dual-stack socket", got: tcp("::", 80), want: "0.0.0.0:80"},
		{name: ":: and an IPv4 wildcard socket", got: tcp("0.0.0.0", 80), want: "[::]:80"},
		{name: "IPv4 in IPv6 form", got: tcp("::ffff:127.0.0.1", 80), want: "127.0.0.1:80"},
		{name: "IPv6", got: tcp("::1", 9090), want: "[::1]:9090"},
		{name: "host name resolving to the socket's address", got: tcp("127.0.0.1", 9090), want: "localhost:9090"},
		{name: "host name resolving elsewhere", got: tcp("127.0.0.1", 9090), want: "lb.example:9090", err: "but the configuration says lb.example:9090"},
		{name: "host name that does not resolve", got: tcp("127.0.0.1", 9090), want: "nowhere.invalid:9090", err: "no such host"},
		{name: "service name port", got: tcp("127.0.0.1", 80), want: "127.0.0.1:http"},
		{name: "unparsable", got: tcp("127.0.0.1", 80), want: "127.0.0.1", err: `cannot be matched with "127.0.0.1"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := matchAddr(tc.got, tc.want, lookup)
			switch {
			case tc.err == "" && err != nil:
				t.Errorf("got %v, want a match", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("got %v, want an error containing %q", err, tc.err)
			}
		})
	}
}

// inheriting returns a Handover that inherited ln as name, as New makes it from systemd.
func inheriting(t *testing.T, name string, ln net.Listener) *Handover {
	t.Helper()
	h, err := New(Options{Names: []string{Proxy, Admin}})
	if err != nil {
		t.Fatal(err)
	}
	h.from = fromSystemd
	h.inherited[name] = ln.(*net.TCPListener)
	return h
}

func listenLocal(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	return ln
}

// TestListen: an inherited socket on the configured address is the listener Listen returns; one
// elsewhere is refused and closed; a listener nobody passed is bound; a name is asked for once.
func TestListen(t *testing.T) {
	t.Run("inherited, same address", func(t *testing.T) {
		ln := listenLocal(t)
		h := inheriting(t, Proxy, ln)
		got, err := h.Listen(Proxy, ln.Addr().String())
		if err != nil || got != ln {
			t.Fatalf("Listen = %v, %v; want the inherited listener", got, err)
		}
		if _, err := h.Listen(Proxy, ln.Addr().String()); err == nil || !strings.Contains(err.Error(), "already open") {
			t.Errorf("a second Listen(proxy): %v", err)
		}
	})
	t.Run("inherited, another address", func(t *testing.T) {
		ln := listenLocal(t)
		h := inheriting(t, Proxy, ln)
		_, err := h.Listen(Proxy, "127.0.0.1:1")
		if err == nil || !strings.Contains(err.Error(), "proxy listener: the socket inherited from systemd listens on "+ln.Addr().String()+", but the configuration says 127.0.0.1:1") {
			t.Fatalf("Listen on another address: %v", err)
		}
		if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
			_ = c.Close()
			t.Error("the refused socket still accepts connections")
		}
	})
	t.Run("not inherited", func(t *testing.T) {
		h := inheriting(t, Proxy, listenLocal(t))
		got, err := h.Listen(Admin, "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer got.Close()
		if c, err := net.Dial("tcp", got.Addr().String()); err != nil {
			t.Errorf("the bound admin listener: %v", err)
		} else {
			_ = c.Close()
		}
	})
	t.Run("unknown name", func(t *testing.T) {
		h := inheriting(t, Proxy, listenLocal(t))
		if _, err := h.Listen("metrics", "127.0.0.1:0"); err == nil {
			t.Error("Listen(metrics) succeeded")
		}
	})
	t.Run("Ready closes what nobody asked for", func(t *testing.T) {
		ln := listenLocal(t)
		h := inheriting(t, Admin, ln)
		if err := h.Ready(); err != nil {
			t.Fatal(err)
		}
		if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
			_ = c.Close()
			t.Error("an inherited socket that Listen was not asked for still accepts after Ready")
		}
	})
}

func TestNewRejectsListenerNames(t *testing.T) {
	for _, names := range [][]string{{"proxy", "proxy"}, {"web"}, {""}} {
		if _, err := New(Options{Names: names}); err == nil {
			t.Errorf("New with names %q succeeded", names)
		}
	}
}
