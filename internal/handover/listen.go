package handover

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Listen returns the listener name (Proxy, TLS or Admin) for the configured address addr: the
// inherited one when this process was given one, else one it binds as usual. Each name is
// asked for once, before Ready.
//
// An inherited socket must listen on addr: same port (any, when addr's port is 0) and same
// address (any unspecified one when addr's host is empty, 0.0.0.0 or ::; one that addr's host
// name resolves to otherwise). When it does not, Listen closes it and returns an error: the
// launcher and the configuration disagree — a socket unit that was not changed with the
// configuration, or an upgrade after the configuration moved a listener — and serving on an
// address the configuration does not name would hide that. After an upgrade the old process
// keeps serving; a listener moves with a restart.
func (h *Handover) Listen(name, addr string) (net.Listener, error) {
	if !slices.Contains(knownNames(), name) {
		return nil, fmt.Errorf("listener %q: pollbal's listeners are %s", name, strings.Join(knownNames(), ", "))
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.listeners[name]; ok {
		return nil, fmt.Errorf("%s listener: already open", name)
	}
	if ln, ok := h.inherited[name]; ok {
		delete(h.inherited, name)
		if err := matchAddr(ln.Addr().(*net.TCPAddr), addr, lookupIP); err != nil {
			_ = ln.Close()
			return nil, fmt.Errorf("%s listener: the socket inherited from %s %w", name, h.from, err)
		}
		h.listeners[name] = ln
		h.log.Info("serving on an inherited socket", "listener", name, "address", ln.Addr().String(), "from", h.from)
		return ln, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	h.listeners[name] = ln.(*net.TCPListener)
	return ln, nil
}

// matchAddr says how the address a socket listens on (got) differs from the configured one
// (want, host:port), or nil when it is the one; lookup resolves a host name.
func matchAddr(got *net.TCPAddr, want string, lookup func(host string) ([]net.IP, error)) error {
	host, portText, err := net.SplitHostPort(want)
	if err != nil {
		return fmt.Errorf("cannot be matched with %q: %w", want, err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		if port, err = net.LookupPort("tcp", portText); err != nil {
			return fmt.Errorf("cannot be matched with %q: %w", want, err)
		}
	}
	mismatch := fmt.Errorf("listens on %s, but the configuration says %s", got, want)
	if port != 0 && port != got.Port {
		return mismatch
	}
	if host == "" {
		if !got.IP.IsUnspecified() {
			return mismatch
		}
		return nil
	}
	if ip := net.ParseIP(host); ip != nil {
		// Go listens on 0.0.0.0 and :: alike (both families), so any unspecified is the other.
		if !got.IP.Equal(ip) && !(ip.IsUnspecified() && got.IP.IsUnspecified()) {
			return mismatch
		}
		return nil
	}
	ips, err := lookup(host)
	if err != nil {
		return fmt.Errorf("cannot be matched with %q: %w", want, err)
	}
	if !slices.ContainsFunc(ips, got.IP.Equal) {
		return mismatch
	}
	return nil
}

// lookupIP resolves host as net.Listen would.
func lookupIP(host string) ([]net.IP, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupIPAddr(ctx, host)
	ips := make([]net.IP, len(addrs))
	for i, a := range addrs {
		ips[i] = a.IP
	}
	return ips, err
}
