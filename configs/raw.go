package configs

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// field is one scalar exactly as the YAML wrote it. Decoding keeps the node so that the
// conversion can tell an absent key (or an explicit null) from an explicit zero, and can report
// a bad value with its path and line instead of yaml's Go type names.
type field struct {
	node *yaml.Node
}

// UnmarshalYAML keeps the node; yaml.v3 never calls it for a null, which therefore reads as
// absent.
func (f *field) UnmarshalYAML(n *yaml.Node) error {
	f.node = n
	return nil
}

func (f field) set() bool { return f.node != nil }

// The raw mirror of Config: same keys, every scalar a field, so decoding cannot fail on a value
// and KnownFields(true) still rejects unknown keys.
type (
	rawConfig struct {
		Site     field                 `yaml:"site"`
		Listen   field                 `yaml:"listen"`
		Admin    rawAdmin              `yaml:"admin"`
		Poll     rawPoll               `yaml:"poll"`
		Warning  rawWarning            `yaml:"warning"`
		Proxy    rawProxy              `yaml:"proxy"`
		Services map[string]rawService `yaml:"services"`
		Apps     []rawApp              `yaml:"apps"`
		Backends []rawBackend          `yaml:"backends"`
		Alarms   rawAlarms             `yaml:"alarms"`
		Fleet    rawFleet              `yaml:"fleet"`
		TLS      rawTLS                `yaml:"tls"`
	}
	rawAdmin struct {
		Listen    field    `yaml:"listen"`
		TokenFile field    `yaml:"token_file"`
		StateFile field    `yaml:"state_file"`
		Store     rawStore `yaml:"store"`
	}
	rawStore struct {
		Etcd *rawEtcd `yaml:"etcd"`
	}
	rawEtcd struct {
		Endpoints    []field `yaml:"endpoints"`
		Prefix       field   `yaml:"prefix"`
		DialTimeout  field   `yaml:"dial_timeout"`
		Username     field   `yaml:"username"`
		PasswordFile field   `yaml:"password_file"`
		CAFile       field   `yaml:"ca_file"`
		CertFile     field   `yaml:"cert_file"`
		KeyFile      field   `yaml:"key_file"`
	}
	rawPoll struct {
		Interval   field `yaml:"interval"`
		Timeout    field `yaml:"timeout"`
		Fall       field `yaml:"fall"`
		Rise       field `yaml:"rise"`
		MaxBackoff field `yaml:"max_backoff"`
		MaxBody    field `yaml:"max_body"`
	}
	rawWarning struct {
		Timeout    field `yaml:"timeout"`
		SecretFile field `yaml:"secret_file"`
	}
	rawProxy struct {
		BackendTimeout field `yaml:"backend_timeout"`
		MaxRequestBody field `yaml:"max_request_body"`
		Retries        field `yaml:"retries"`
		EjectAfter     field `yaml:"eject_after"`
		TieBreak       field `yaml:"tie_break"`
		SlowStart      field `yaml:"slow_start"`

		MaxConnections    field   `yaml:"max_connections"`
		HeaderTimeout     field   `yaml:"header_timeout"`
		ClientTimeout     field   `yaml:"client_timeout"`
		IdleTimeout       field   `yaml:"idle_timeout"`
		ShutdownTimeout   field   `yaml:"shutdown_timeout"`
		BufferRequestBody field   `yaml:"buffer_request_body"`
		TrustedProxies    []field `yaml:"trusted_proxies"`

		UpgradeIdleTimeout field `yaml:"upgrade_idle_timeout"`
		QueueTimeout       field `yaml:"queue_timeout"`
		MaxQueue           field `yaml:"max_queue"`
	}
	rawService struct {
		WarningThreshold field `yaml:"warning_threshold"`
		WarningScope     field `yaml:"warning_scope"`
	}
	rawApp struct {
		Name                   field   `yaml:"name"`
		Hosts                  []field `yaml:"hosts"`
		Service                field   `yaml:"service"`
		Pool                   field   `yaml:"pool"`
		Owner                  field   `yaml:"owner"`
		AllowFallbackToDefault field   `yaml:"allow_fallback_to_default"`
	}
	rawBackend struct {
		ID       field `yaml:"id"`
		Address  field `yaml:"address"`
		Capacity field `yaml:"capacity"`
		Pool     field `yaml:"pool"`
		Owner    field `yaml:"owner"`
	}
	rawTLS struct {
		Listen       field            `yaml:"listen"`
		Certificates []rawCertificate `yaml:"certificates"`
		MinVersion   field            `yaml:"min_version"`
	}
	rawCertificate struct {
		CertFile field `yaml:"cert_file"`
		KeyFile  field `yaml:"key_file"`
	}
	rawFleet struct {
		Instances field `yaml:"instances"`
	}
	rawAlarms struct {
		Webhook     field `yaml:"webhook"`
		DedupWindow field `yaml:"dedup_window"`
	}
)

// converter turns fields into typed values, recording a problem for each one that does not
// fit its type. A field that does not fit leaves the destination (its default) unchanged.
type converter struct {
	p *problemList
}

// scalar returns the field's node when it is a scalar; otherwise it records that the key wants
// the given kind of value and returns nil.
func (cv converter) scalar(f field, path, want string) *yaml.Node {
	if !f.set() {
		return nil
	}
	n := f.node
	if n.Kind != yaml.ScalarNode {
		cv.p.unusable(path, fmt.Errorf("must be %s, got %s (line %d)", want, describeNode(n), n.Line))
		return nil
	}
	return n
}

func (cv converter) str(f field, path string, dst *string) {
	if n := cv.scalar(f, path, "a string"); n != nil {
		*dst = n.Value
	}
}

// prefix appends the trusted-proxy CIDR (or single address) that f holds; see
// ParseTrustedProxy.
func (cv converter) prefix(f field, path string, dst *[]netip.Prefix) {
	if pfx, ok := convert(cv, f, path, "a CIDR such as 10.0.0.0/8", parsePrefix); ok {
		*dst = append(*dst, pfx)
	}
}

func (cv converter) integer(f field, path string, dst *int) {
	// yaml.v3 would truncate 1.5 into an int; only an !!int scalar is an integer here.
	if v, ok := convert(cv, f, path, "an integer", tagged[int]("!!int", "an integer")); ok {
		*dst = v
	}
}

func (cv converter) duration(f field, path string, dst *time.Duration) {
	if d, ok := convert(cv, f, path, "a duration", parseDuration); ok {
		*dst = d
	}
}

func (cv converter) boolean(f field, path string, dst **bool) {
	if v, ok := convert(cv, f, path, "true or false", tagged[bool]("!!bool", "true or false")); ok {
		*dst = &v
	}
}

// convert returns what parse reads from f's scalar, and whether there is a value: none when
// the key is left out, or its value is not a scalar (the key wants the kind of value named by
// want), or parse rejects it; the last two are recorded as unusable at path.
func convert[T any](cv converter, f field, path, want string, parse func(*yaml.Node) (T, error)) (T, bool) {
	var v T
	n := cv.scalar(f, path, want)
	if n == nil {
		return v, false
	}
	v, err := parse(n)
	if err != nil {
		cv.p.unusable(path, err)
		return v, false
	}
	return v, true
}

// tagged parses a scalar that YAML itself types as tag (such as !!int), which a value of
// the kind named by want must be.
func tagged[T any](tag, want string) func(*yaml.Node) (T, error) {
	return func(n *yaml.Node) (T, error) {
		var v T
		if n.ShortTag() != tag || n.Decode(&v) != nil {
			return v, fmt.Errorf("must be %s, got %q (line %d)", want, n.Value, n.Line)
		}
		return v, nil
	}
}

func parseDuration(n *yaml.Node) (time.Duration, error) {
	d, err := time.ParseDuration(n.Value)
	if err != nil {
		return 0, fmt.Errorf("%q is not a Go duration such as 500ms or 1m30s (line %d): %w", n.Value, n.Line, err)
	}
	return d, nil
}

func parsePrefix(n *yaml.Node) (netip.Prefix, error) {
	pfx, err := ParseTrustedProxy(n.Value)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%w (line %d)", err, n.Line)
	}
	return pfx, nil
}

// config converts the raw mirror onto Default(), then fills the defaults of list elements and
// map values. Keys that were written keep their value even when it is a zero, so that Validate
// rejects e.g. an explicit `capacity: 0` instead of it becoming 100.
func (r *rawConfig) config(p *problemList) *Config {
	cv := converter{p: p}
	c := Default()
	cv.str(r.Site, "site", &c.Site)
	cv.str(r.Listen, "listen", &c.Listen)

	cv.str(r.Admin.Listen, "admin.listen", &c.Admin.Listen)
	cv.str(r.Admin.TokenFile, "admin.token_file", &c.Admin.TokenFile)
	cv.str(r.Admin.StateFile, "admin.state_file", &c.Admin.StateFile)
	if re := r.Admin.Store.Etcd; re != nil {
		const path = "admin.store.etcd"
		e := &Etcd{Prefix: DefaultEtcdPrefix, DialTimeout: defaultEtcdDialTimeout}
		for i, f := range re.Endpoints {
			var ep string
			cv.str(f, fmt.Sprintf("%s.endpoints[%d]", path, i), &ep)
			e.Endpoints = append(e.Endpoints, ep)
		}
		cv.str(re.Prefix, path+".prefix", &e.Prefix)
		cv.duration(re.DialTimeout, path+".dial_timeout", &e.DialTimeout)
		cv.str(re.Username, path+".username", &e.Username)
		cv.str(re.PasswordFile, path+".password_file", &e.PasswordFile)
		cv.str(re.CAFile, path+".ca_file", &e.CAFile)
		cv.str(re.CertFile, path+".cert_file", &e.CertFile)
		cv.str(re.KeyFile, path+".key_file", &e.KeyFile)
		c.Admin.Store.Etcd = e
	}

	cv.duration(r.Poll.Interval, "poll.interval", &c.Poll.Interval)
	cv.duration(r.Poll.Timeout, "poll.timeout", &c.Poll.Timeout)
	cv.integer(r.Poll.Fall, "poll.fall", &c.Poll.Fall)
	cv.integer(r.Poll.Rise, "poll.rise", &c.Poll.Rise)
	cv.duration(r.Poll.MaxBackoff, "poll.max_backoff", &c.Poll.MaxBackoff)
	cv.integer(r.Poll.MaxBody, "poll.max_body", &c.Poll.MaxBody)

	cv.duration(r.Warning.Timeout, "warning.timeout", &c.Warning.Timeout)
	cv.str(r.Warning.SecretFile, "warning.secret_file", &c.Warning.SecretFile)

	cv.duration(r.Proxy.BackendTimeout, "proxy.backend_timeout", &c.Proxy.BackendTimeout)
	cv.integer(r.Proxy.MaxRequestBody, "proxy.max_request_body", &c.Proxy.MaxRequestBody)
	cv.integer(r.Proxy.Retries, "proxy.retries", &c.Proxy.Retries)
	cv.integer(r.Proxy.EjectAfter, "proxy.eject_after", &c.Proxy.EjectAfter)
	cv.str(r.Proxy.TieBreak, "proxy.tie_break", &c.Proxy.TieBreak)
	cv.duration(r.Proxy.SlowStart, "proxy.slow_start", &c.Proxy.SlowStart)
	cv.integer(r.Proxy.MaxConnections, "proxy.max_connections", &c.Proxy.MaxConnections)
	cv.duration(r.Proxy.HeaderTimeout, "proxy.header_timeout", &c.Proxy.HeaderTimeout)
	cv.duration(r.Proxy.ClientTimeout, "proxy.client_timeout", &c.Proxy.ClientTimeout)
	cv.duration(r.Proxy.IdleTimeout, "proxy.idle_timeout", &c.Proxy.IdleTimeout)
	cv.duration(r.Proxy.ShutdownTimeout, "proxy.shutdown_timeout", &c.Proxy.ShutdownTimeout)
	cv.integer(r.Proxy.BufferRequestBody, "proxy.buffer_request_body", &c.Proxy.BufferRequestBody)
	cv.duration(r.Proxy.UpgradeIdleTimeout, "proxy.upgrade_idle_timeout", &c.Proxy.UpgradeIdleTimeout)
	cv.duration(r.Proxy.QueueTimeout, "proxy.queue_timeout", &c.Proxy.QueueTimeout)
	cv.integer(r.Proxy.MaxQueue, "proxy.max_queue", &c.Proxy.MaxQueue)
	for i, f := range r.Proxy.TrustedProxies {
		cv.prefix(f, fmt.Sprintf("proxy.trusted_proxies[%d]", i), &c.Proxy.TrustedProxies)
	}

	cv.str(r.Alarms.Webhook, "alarms.webhook", &c.Alarms.Webhook)
	cv.duration(r.Alarms.DedupWindow, "alarms.dedup_window", &c.Alarms.DedupWindow)
	cv.integer(r.Fleet.Instances, "fleet.instances", &c.Fleet.Instances)

	cv.str(r.TLS.Listen, "tls.listen", &c.TLS.Listen)
	cv.str(r.TLS.MinVersion, "tls.min_version", &c.TLS.MinVersion)
	for i, rc := range r.TLS.Certificates {
		path := fmt.Sprintf("tls.certificates[%d]", i)
		var cert Certificate
		cv.str(rc.CertFile, path+".cert_file", &cert.CertFile)
		cv.str(rc.KeyFile, path+".key_file", &cert.KeyFile)
		c.TLS.Certificates = append(c.TLS.Certificates, cert)
	}

	if r.Services != nil {
		c.Services = make(map[string]Service, len(r.Services))
	}
	for name, rs := range r.Services {
		s := Service{WarningScope: defaultWarningScope}
		path := servicePath(name)
		cv.integer(rs.WarningThreshold, path+".warning_threshold", &s.WarningThreshold)
		cv.str(rs.WarningScope, path+".warning_scope", &s.WarningScope)
		c.Services[name] = s
	}

	for i, ra := range r.Apps {
		path := fmt.Sprintf("apps[%d]", i)
		var a App
		cv.str(ra.Name, path+".name", &a.Name)
		if ra.Hosts != nil {
			a.Hosts = make([]string, len(ra.Hosts))
		}
		for j, h := range ra.Hosts {
			cv.str(h, fmt.Sprintf("%s.hosts[%d]", path, j), &a.Hosts[j])
			a.Hosts[j] = strings.ToLower(a.Hosts[j])
		}
		if !ra.Service.set() && len(c.Services) == 1 {
			for name := range c.Services {
				a.Service = name
			}
		}
		cv.str(ra.Service, path+".service", &a.Service)
		cv.str(ra.Pool, path+".pool", &a.Pool)
		cv.str(ra.Owner, path+".owner", &a.Owner)
		cv.boolean(ra.AllowFallbackToDefault, path+".allow_fallback_to_default", &a.AllowFallbackToDefault)
		c.Apps = append(c.Apps, a)
	}

	for i, rb := range r.Backends {
		path := fmt.Sprintf("backends[%d]", i)
		b := Backend{Capacity: DefaultCapacity}
		cv.str(rb.Address, path+".address", &b.Address)
		if !rb.ID.set() {
			b.ID = b.Address
		}
		cv.str(rb.ID, path+".id", &b.ID)
		cv.integer(rb.Capacity, path+".capacity", &b.Capacity)
		cv.str(rb.Pool, path+".pool", &b.Pool)
		cv.str(rb.Owner, path+".owner", &b.Owner)
		c.Backends = append(c.Backends, b)
	}
	return c
}

// describeNode names a node's kind for messages: "a list", "a mapping", "a string".
func describeNode(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	case yaml.AliasNode:
		return "an alias"
	case yaml.DocumentNode:
		return "a document"
	}
	return describeTag(n.ShortTag())
}

// describeTag names a YAML tag for messages.
func describeTag(tag string) string {
	switch tag {
	case "!!str":
		return "a string"
	case "!!int":
		return "an integer"
	case "!!float":
		return "a number"
	case "!!bool":
		return "a boolean"
	case "!!null":
		return "null"
	case "!!seq":
		return "a list"
	case "!!map":
		return "a mapping"
	case "!!timestamp":
		return "a timestamp"
	case "!!binary":
		return "binary data"
	}
	return fmt.Sprintf("a %s value", tag)
}

// servicePath is the path of a service entry; a name that is not a plain token is quoted so
// that the path stays readable.
func servicePath(name string) string {
	if ValidServiceName(name) {
		return "services." + name
	}
	return fmt.Sprintf("services[%q]", name)
}
