package configs

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// Validate checks c against the schema and returns every problem at once, each prefixed with its
// path (`backends[2].address: missing port`); Problems splits the error into lines. It checks
// the values as they are, defaults included: a Config built in Go must set what Parse would
// have defaulted. It never panics and does not modify c.
func (c *Config) Validate() error {
	if c == nil {
		return errors.New("config is nil")
	}
	var p problemList
	c.validateTop(&p)
	c.validateServices(&p)
	c.validateApps(&p)
	c.validateBackends(&p)
	return p.err()
}

func (c *Config) validateTop(p *problemList) {
	switch {
	case c.Site == "":
		p.add("site", "required")
	case !tokenRe.MatchString(c.Site):
		p.add("site", "%q must match %s", c.Site, tokenGrammar)
	}
	var listenErr error
	switch {
	case c.Listen == "" && c.TLS.Listen != "":
		// TLS only: no plain listener.
		listenErr = errNoListener
	case c.Listen == "":
		listenErr = errors.New("required (it may be empty only when tls.listen is set)")
		p.wrap("listen", listenErr)
	default:
		if listenErr = checkAddress(c.Listen, true); listenErr != nil {
			p.wrap("listen", listenErr)
		}
	}
	adminErr := checkAddress(c.Admin.Listen, true)
	if adminErr != nil {
		p.wrap("admin.listen", adminErr)
	}
	if listenErr == nil && adminErr == nil && sameListener(c.Listen, c.Admin.Listen) {
		p.add("admin.listen", "must differ from listen (%s)", c.Listen)
	}
	atLeast(p, "admin.max_connections", c.Admin.MaxConnections, 1)
	c.validateTLS(p, listenErr, adminErr)
	c.validateHTTP2(p)
	c.validateStore(p)

	positive(p, "poll.interval", c.Poll.Interval)
	positive(p, "poll.timeout", c.Poll.Timeout)
	positive(p, "poll.max_backoff", c.Poll.MaxBackoff)
	if c.Poll.Interval > 0 && c.Poll.Timeout > 0 && c.Poll.Timeout >= c.Poll.Interval {
		p.add("poll.timeout", "must be less than poll.interval (%s)", c.Poll.Interval)
	}
	if c.Poll.Interval > 0 && c.Poll.MaxBackoff > 0 && c.Poll.MaxBackoff < c.Poll.Interval {
		p.add("poll.max_backoff", "must be at least poll.interval (%s)", c.Poll.Interval)
	}
	atLeast(p, "poll.fall", c.Poll.Fall, 1)
	atLeast(p, "poll.rise", c.Poll.Rise, 1)
	atLeast(p, "poll.max_body", c.Poll.MaxBody, 1)
	positive(p, "poll.restore_max_age", c.Poll.RestoreMaxAge)
	c.validateStateDir(p)

	positive(p, "warning.timeout", c.Warning.Timeout)

	positive(p, "proxy.backend_timeout", c.Proxy.BackendTimeout)
	atLeast(p, "proxy.max_request_body", c.Proxy.MaxRequestBody, 1)
	atLeast(p, "proxy.retries", c.Proxy.Retries, 0)
	atMost(p, "proxy.retries", c.Proxy.Retries, MaxRetries)
	atLeast(p, "proxy.eject_after", c.Proxy.EjectAfter, 0)
	oneOf(p, "proxy.tie_break", c.Proxy.TieBreak, TieBreakRotate, TieBreakID)
	if c.Proxy.SlowStart < 0 {
		p.add("proxy.slow_start", "must be >= 0 (got %s)", c.Proxy.SlowStart)
	}
	atLeast(p, "proxy.max_connections", c.Proxy.MaxConnections, 1)
	positive(p, "proxy.header_timeout", c.Proxy.HeaderTimeout)
	positive(p, "proxy.client_timeout", c.Proxy.ClientTimeout)
	positive(p, "proxy.idle_timeout", c.Proxy.IdleTimeout)
	positive(p, "proxy.shutdown_timeout", c.Proxy.ShutdownTimeout)
	atLeast(p, "proxy.buffer_request_body", c.Proxy.BufferRequestBody, 0)
	positive(p, "proxy.upgrade_idle_timeout", c.Proxy.UpgradeIdleTimeout)
	if c.Proxy.QueueTimeout < 0 {
		p.add("proxy.queue_timeout", "must be >= 0 (got %s)", c.Proxy.QueueTimeout)
	}
	atLeast(p, "proxy.max_queue", c.Proxy.MaxQueue, 1)

	if c.Alarms.Webhook != "" {
		if err := checkWebhook(c.Alarms.Webhook); err != nil {
			p.wrap("alarms.webhook", err)
		}
	}
	positive(p, "alarms.dedup_window", c.Alarms.DedupWindow)
	atLeast(p, "fleet.instances", c.Fleet.Instances, 1)
	c.validateAccessLog(p)
}

// validateHTTP2 checks the http2 section: h2c needs the plain listener it is served on.
func (c *Config) validateHTTP2(p *problemList) {
	h := &c.HTTP2
	atLeast(p, "http2.max_concurrent_streams", h.MaxConcurrentStreams, 1)
	atMost(p, "http2.max_concurrent_streams", h.MaxConcurrentStreams, MaxHTTP2Streams)
	atLeast(p, "http2.max_header_bytes", h.MaxHeaderBytes, MinHTTP2HeaderBytes)
	atMost(p, "http2.max_header_bytes", h.MaxHeaderBytes, MaxHTTP2HeaderBytes)
	if h.H2C && c.Listen == "" {
		p.add("http2.h2c", "needs the plain listener (listen is empty)")
	}
}

// Bounds of the http2 keys: a stream count an HTTP/2 SETTINGS frame can carry and that
// keeps one connection's leases and buffers bounded; a header limit that fits an ordinary
// request and stays far below what a connection may hold in memory.
const (
	MaxHTTP2Streams     = 10000
	MinHTTP2HeaderBytes = 4096
	MaxHTTP2HeaderBytes = 1 << 20
)

// errNoListener marks an empty listen (plain HTTP off) for the checks that compare addresses.
var errNoListener = errors.New("no plain listener")

// validateTLS checks the tls section: off (no listen) it must hold no certificates; on, its
// address must be valid and differ from the other listeners, and it needs at least one
// certificate, each naming both files. Whether the files exist and match is checked where
// they are read (pollbal check, start and reload), not here.
func (c *Config) validateTLS(p *problemList, listenErr, adminErr error) {
	t := &c.TLS
	oneOf(p, "tls.min_version", t.MinVersion, TLSVersion12, TLSVersion13)
	if t.Listen == "" {
		if len(t.Certificates) > 0 {
			p.add("tls.listen", "required when tls.certificates are set (or remove them)")
		}
		return
	}
	if err := checkAddress(t.Listen, true); err != nil {
		p.wrap("tls.listen", err)
	} else {
		if listenErr == nil && sameListener(t.Listen, c.Listen) {
			p.add("tls.listen", "must differ from listen (%s)", c.Listen)
		}
		if adminErr == nil && sameListener(t.Listen, c.Admin.Listen) {
			p.add("tls.listen", "must differ from admin.listen (%s)", c.Admin.Listen)
		}
	}
	if len(t.Certificates) == 0 {
		p.add("tls.certificates", "at least one certificate required when tls.listen is set")
	}
	for i, cert := range t.Certificates {
		path := fmt.Sprintf("tls.certificates[%d]", i)
		if cert.CertFile == "" {
			p.add(path+".cert_file", "required")
		}
		if cert.KeyFile == "" {
			p.add(path+".key_file", "required")
		}
	}
}

// validateStore checks admin.store.etcd: at least one host:port endpoint, a prefix that ends
// in "/", a positive dial timeout, and the pairs that only work together. Whether the files
// can be read is checked where they are read (pollbal check, start).
func (c *Config) validateStore(p *problemList) {
	e := c.Admin.Store.Etcd
	if e == nil {
		return
	}
	const path = "admin.store.etcd"
	if len(e.Endpoints) == 0 {
		p.add(path+".endpoints", "at least one endpoint (host:port) required")
	}
	seen := make(map[string]int, len(e.Endpoints))
	for i, ep := range e.Endpoints {
		epath := fmt.Sprintf("%s.endpoints[%d]", path, i)
		if err := checkAddress(ep, false); err != nil {
			p.wrap(epath, err)
		} else if first, dup := seen[addressKey(ep)]; dup {
			p.add(epath, "%q is already listed as endpoints[%d]", ep, first)
		} else {
			seen[addressKey(ep)] = i
		}
	}
	switch {
	case e.Prefix == "":
		p.add(path+".prefix", "must not be empty (the default is %q)", DefaultEtcdPrefix)
	case !strings.HasSuffix(e.Prefix, "/"):
		p.add(path+".prefix", "%q must end with \"/\"", e.Prefix)
	case strings.ContainsFunc(e.Prefix, unicode.IsSpace):
		p.add(path+".prefix", "%q must not contain white space", e.Prefix)
	}
	positive(p, path+".dial_timeout", e.DialTimeout)
	if e.Username != "" && e.PasswordFile == "" {
		p.add(path+".password_file", "required when username is set")
	}
	if e.PasswordFile != "" && e.Username == "" {
		p.add(path+".username", "required when password_file is set")
	}
	if e.CertFile != "" && e.KeyFile == "" {
		p.add(path+".key_file", "required when cert_file is set")
	}
	if e.KeyFile != "" && e.CertFile == "" {
		p.add(path+".cert_file", "required when key_file is set")
	}
}

func positive(p *problemList, path string, d time.Duration) {
	if d <= 0 {
		p.add(path, "must be > 0 (got %s)", d)
	}
}

func atLeast(p *problemList, path string, v, limit int) {
	if v < limit {
		p.add(path, "must be >= %d (got %d)", limit, v)
	}
}

func atMost(p *problemList, path string, v, limit int) {
	if v > limit {
		p.add(path, "must be <= %d (got %d)", limit, v)
	}
}

// oneOf checks a key that takes one of the words in want.
func oneOf(p *problemList, path, v string, want ...string) {
	if !slices.Contains(want, v) {
		quoted := make([]string, len(want))
		for i, w := range want {
			quoted[i] = strconv.Quote(w)
		}
		p.add(path, "must be %s (got %q)", strings.Join(quoted, " or "), v)
	}
}

func (c *Config) validateServices(p *problemList) {
	if len(c.Services) == 0 {
		p.add("services", "at least one service required")
		return
	}
	for _, name := range slices.Sorted(maps.Keys(c.Services)) {
		s := c.Services[name]
		path := servicePath(name)
		if !tokenRe.MatchString(name) {
			p.add(path, "service name must match %s", tokenGrammar)
		}
		atLeast(p, path+".warning_threshold", s.WarningThreshold, 0)
		oneOf(p, path+".warning_scope", s.WarningScope, ScopeVersion, ScopeService)
	}
}

func (c *Config) validateApps(p *problemList) {
	names := make(map[string]int, len(c.Apps))
	hosts := make(map[string]string)
	for i, a := range c.Apps {
		path := fmt.Sprintf("apps[%d]", i)
		switch first, dup := names[a.Name]; {
		case a.Name == "":
			p.add(path+".name", "required")
		case !poolRe.MatchString(a.Name):
			p.add(path+".name", "%q must match %s", a.Name, poolGrammar)
		case dup:
			p.add(path+".name", "%q is already used by apps[%d]", a.Name, first)
		default:
			names[a.Name] = i
		}

		if len(a.Hosts) == 0 {
			p.add(path+".hosts", "at least one host required")
		}
		for j, h := range a.Hosts {
			hpath := fmt.Sprintf("%s.hosts[%d]", path, j)
			if err := checkHostPattern(h); err != nil {
				p.wrap(hpath, err)
				continue
			}
			if first, dup := hosts[h]; dup {
				p.add(hpath, "%q is already used by %s", h, first)
				continue
			}
			hosts[h] = hpath
		}

		switch _, declared := c.Services[a.Service]; {
		case a.Service == "" && len(c.Services) > 1:
			p.add(path+".service", "required when more than one service is declared")
		case a.Service == "":
			p.add(path+".service", "required")
		case !declared:
			p.add(path+".service", "%q is not a declared service", a.Service)
		}

		if a.Pool != "" {
			switch {
			case !poolRe.MatchString(a.Pool):
				p.add(path+".pool", "%q must match %s", a.Pool, poolGrammar)
			case a.Pool == PoolUnassigned:
				p.add(path+".pool", "%q is reserved and cannot be used by an app", a.Pool)
			}
		}
		checkOwner(p, path+".owner", a.Owner)
	}
}

// checkOwner checks that a set owner names a valid pool-<owner>.
func checkOwner(p *problemList, path, owner string) {
	if owner == "" {
		return
	}
	if pool := OwnerPool(owner); !poolRe.MatchString(pool) {
		p.add(path, "%q gives pool %q, which must match %s", owner, pool, poolGrammar)
	}
}

func (c *Config) validateBackends(p *problemList) {
	ids := make(map[string]int, len(c.Backends))
	addrs := make(map[string]int, len(c.Backends)) // by addressKey: one socket, any spelling
	for i, b := range c.Backends {
		path := fmt.Sprintf("backends[%d]", i)
		switch first, dup := ids[b.ID]; {
		case b.ID == "" && b.Address == "":
			// The id defaults to the address: the address problem below says it all.
		case b.ID == "":
			p.add(path+".id", "required")
		// The default id is the address, which has a colon: it is accepted as it is.
		case !tokenRe.MatchString(b.ID) && b.ID != b.Address:
			p.add(path+".id", "%q must match %s (or equal the address)", b.ID, tokenGrammar)
		case dup:
			p.add(path+".id", "%q is already used by backends[%d]", b.ID, first)
		default:
			ids[b.ID] = i
		}

		key := addressKey(b.Address)
		if err := checkAddress(b.Address, false); err != nil {
			p.wrap(path+".address", err)
		} else if first, dup := addrs[key]; dup && c.Backends[first].Address == b.Address {
			p.add(path+".address", "%q is already used by backends[%d]", b.Address, first)
		} else if dup {
			p.add(path+".address", "%q is the same host:port as backends[%d] (%q)", b.Address, first, c.Backends[first].Address)
		} else {
			addrs[key] = i
		}

		atLeast(p, path+".capacity", b.Capacity, 1)
		if b.Pool != "" && !poolRe.MatchString(b.Pool) {
			p.add(path+".pool", "%q must match %s", b.Pool, poolGrammar)
		}
		checkOwner(p, path+".owner", b.Owner)
	}
}

// RuntimeStateName is the file in state_dir that holds the runtime state.
const RuntimeStateName = "runtime.json"

// RuntimeStatePath is where the runtime state is kept: RuntimeStateName in state_dir, "" when
// state_dir is "" (none is kept).
func (c *Config) RuntimeStatePath() string {
	if c.StateDir == "" {
		return ""
	}
	return filepath.Join(c.StateDir, RuntimeStateName)
}

// validateStateDir checks state_dir: empty (off), or a path that is not also where admin moves
// are kept. Whether the directory can be written is checked where it is used (pollbal check,
// start).
func (c *Config) validateStateDir(p *problemList) {
	if c.StateDir == "" {
		return
	}
	if strings.ContainsRune(c.StateDir, 0) {
		p.add("state_dir", "must not contain a NUL byte")
		return
	}
	if c.Admin.StateFile != "" && filepath.Clean(c.Admin.StateFile) == filepath.Clean(c.RuntimeStatePath()) {
		p.add("admin.state_file", "must not be %s in state_dir, where the runtime state is kept", RuntimeStateName)
	}
}
