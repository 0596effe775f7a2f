package configs

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// errMissingPort is the whole message for an address without a port, the most common mistake.
var errMissingPort = errors.New("missing port")

// checkAddress checks a host:port with a numeric port 1..65535. An empty host (all
// interfaces) is allowed only when allowEmptyHost.
func checkAddress(s string, allowEmptyHost bool) error {
	if s == "" {
		return errors.New("required")
	}
	if hint := addressHint(s); hint != nil {
		return hint
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		var addrErr *net.AddrError
		if errors.As(err, &addrErr) && addrErr.Err == "missing port in address" {
			return errMissingPort
		}
		return fmt.Errorf("invalid address %q: %w", s, err)
	}
	if !validPort(port) {
		return fmt.Errorf("port %q must be a number from 1 to 65535", port)
	}
	switch {
	case host == "" && allowEmptyHost:
		return nil
	case host == "":
		return errors.New("missing host")
	case validHost(host):
		return nil
	}
	return fmt.Errorf("invalid host %q", host)
}

// addressHint explains the common slips in a host:port that SplitHostPort would only call "too
// many colons": a URL scheme or a path. It returns nil when neither is there.
func addressHint(s string) error {
	rest := s
	scheme, after, hasScheme := strings.Cut(s, "://")
	if hasScheme {
		rest = after
	}
	hostPort, _, hasPath := strings.Cut(rest, "/")
	switch {
	case hasScheme && hostPort != "":
		return fmt.Errorf("%q is a URL: drop %q and any path (want host:port, e.g. %s)", s, scheme+"://", hostPort)
	case hasScheme:
		return fmt.Errorf("%q is a URL: want host:port", s)
	case hasPath && hostPort != "":
		return fmt.Errorf("%q has a path: drop it (want host:port, e.g. %s)", s, hostPort)
	}
	return nil
}

// addressKey is the form of a valid host:port under which two spellings of one socket compare
// equal: the host lower-cased, "localhost" as 127.0.0.1, an IP in its canonical form, the port
// without leading zeros.
func addressKey(s string) string {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return s
	}
	if n, err := strconv.Atoi(port); err == nil {
		port = strconv.Itoa(n)
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if loopbackHost(host) {
		host = "127.0.0.1"
	} else if a, err := netip.ParseAddr(host); err == nil {
		host = a.Unmap().String()
	}
	return net.JoinHostPort(host, port)
}

func validPort(s string) bool {
	if len(s) == 0 || len(s) > 5 {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	n, err := strconv.Atoi(s)
	return err == nil && n >= 1 && n <= 65535
}

// validHost accepts an IP address (with zone) or a DNS-ish host name in any case.
func validHost(host string) bool {
	if _, err := netip.ParseAddr(host); err == nil {
		return true
	}
	return validHostName(strings.ToLower(host))
}

// validHostName checks a lower-case host name: dot-separated labels, at most 253 bytes.
func validHostName(name string) bool {
	if name == "" || len(name) > 253 {
		return false
	}
	for label := range strings.SplitSeq(name, ".") {
		if !labelRe.MatchString(label) {
			return false
		}
	}
	return true
}

// sameListener reports whether two valid listen addresses would bind the same socket: same
// port, and the same host or a wildcard host on either side.
func sameListener(a, b string) bool {
	hostA, portA, errA := net.SplitHostPort(a)
	hostB, portB, errB := net.SplitHostPort(b)
	if errA != nil || errB != nil || portA != portB {
		return false
	}
	return hostA == hostB || wildcardHost(hostA) || wildcardHost(hostB) ||
		(loopbackHost(hostA) && loopbackHost(hostB))
}

// loopbackHost reports whether h names the IPv4 loopback address that "localhost" resolves to
// here, so "localhost:P" and "127.0.0.1:P" are caught as the same socket.
func loopbackHost(h string) bool { return h == "localhost" || h == "127.0.0.1" }

func wildcardHost(h string) bool { return h == "" || h == "0.0.0.0" || h == "::" }

// checkHostPattern checks an app's host pattern: an exact lower-case host name, one leading
// "*." before one, or "*" alone.
func checkHostPattern(p string) error {
	switch {
	case p == "":
		return errors.New("empty host pattern")
	case p == "*":
		return nil
	case strings.Contains(p, "://"):
		return fmt.Errorf("%q: must be a host name without a scheme", p)
	case strings.ContainsAny(p, "/?#"):
		return fmt.Errorf("%q: must be a host name without a path", p)
	case strings.HasPrefix(p, "["):
		return fmt.Errorf("%q: IPv6 literals are not supported as host patterns", p)
	case strings.Contains(p, ":"):
		return fmt.Errorf("%q: must not contain a port (the port in Host is ignored)", p)
	case p != strings.ToLower(p):
		return fmt.Errorf("%q: must be lower case", p)
	}
	name := strings.TrimPrefix(p, "*.")
	if strings.Contains(name, "*") {
		return fmt.Errorf(`%q: "*" is only allowed alone or as a leading "*."`, p)
	}
	if !validHostName(name) {
		return fmt.Errorf("%q: not a valid host name", p)
	}
	return nil
}

// checkWebhook accepts an absolute http or https URL with a host.
func checkWebhook(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("must be an absolute http or https URL: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("must be an absolute http or https URL (got %q)", s)
	}
	return nil
}
