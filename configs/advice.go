package configs

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// Unserved returns the problems of a valid configuration that cannot serve a single request:
// no app (every request is answered 404 no_app) or no backend (every request is answered 503).
// Such a file is more likely cut short or written for something else than meant, which is
// why the reload guard rejects it unless forced and `pollbal check` fails on it; `pollbal run`
// starts with it (a later reload can add what is missing) and says so. Nil when it serves.
func Unserved(c *Config) []error {
	var errs []error
	if len(c.Apps) == 0 {
		errs = append(errs, &problem{path: "apps", err: errors.New("none: every request would be answered 404 (no_app); declare at least one app")})
	}
	if len(c.Backends) == 0 {
		errs = append(errs, &problem{path: "backends", err: errors.New("none: every request would be answered 503; list at least one backend")})
	}
	return errs
}

// AdminExposure returns a warning when admin.listen accepts connections from other hosts and
// no admin.token_file is set, "" otherwise: the status page, /api/state and /metrics never
// ask for credentials, so whoever reaches the address reads every backend, pool and app.
func AdminExposure(c *Config) string {
	if c.Admin.TokenFile != "" || loopbackOnly(c.Admin.Listen) {
		return ""
	}
	return fmt.Sprintf("admin.listen %s is not a loopback address and admin.token_file is not set: "+
		"the unauthenticated status page, state (/api/state) and metrics (/metrics) are exposed to every host "+
		"that can reach it; listen on 127.0.0.1 or ::1, or restrict who can connect", c.Admin.Listen)
}

// loopbackOnly reports whether a listen address (host:port) accepts connections from this host
// only: a loopback IP or the name localhost. An empty host listens on every interface.
func loopbackOnly(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}
