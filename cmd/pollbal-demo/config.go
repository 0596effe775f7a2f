package main

import (
	"bytes"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"pollbal/configs"
)

// rewrite says how the shipped demo config is changed before the demo runs on it. Everything
// else (poll settings, apps, pools, capacities) is kept as shipped.
type rewrite struct {
	// Addr maps each listen address and backend address to the one the demo uses.
	Addr func(string) (string, error)
	// Scope, when not empty, replaces every service's warning_scope.
	Scope string
	// Note is written as a comment at the top of the file.
	Note string
}

// rewriteConfig applies rw to the YAML document data, keeping its comments, and returns the
// new document. Keys that data leaves to their defaults (listen, admin.listen) are added, so
// that every address the demo relies on is explicit.
func rewriteConfig(data []byte, rw rewrite) ([]byte, error) {
	defaults, err := configs.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("parse demo config: %w", err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("decode demo config: %w", err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("demo config: want one YAML mapping")
	}
	root := doc.Content[0]

	listen, err := rw.Addr(defaults.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	setScalar(root, "listen", listen)
	admin, err := rw.Addr(defaults.Admin.Listen)
	if err != nil {
		return nil, fmt.Errorf("admin.listen: %w", err)
	}
	setScalar(mapping(root, "admin"), "listen", admin)

	if backends := value(root, "backends"); backends != nil {
		for i, b := range backends.Content {
			addr := value(b, "address")
			if addr == nil {
				continue // Parse has already refused a backend without an address.
			}
			next, err := rw.Addr(addr.Value)
			if err != nil {
				return nil, fmt.Errorf("backends[%d].address: %w", i, err)
			}
			addr.Value = next
		}
	}
	if rw.Scope != "" {
		if services := value(root, "services"); services != nil {
			for i := 1; i < len(services.Content); i += 2 {
				svc := services.Content[i]
				if svc.Kind != yaml.MappingNode {
					// "web:" with nothing under it: give it a body to hold the scope.
					svc.Kind, svc.Tag, svc.Value = yaml.MappingNode, "!!map", ""
				}
				setScalar(svc, "warning_scope", rw.Scope)
			}
		}
	}
	var buf bytes.Buffer
	if rw.Note != "" {
		for _, line := range strings.Split(strings.TrimSpace(rw.Note), "\n") {
			fmt.Fprintf(&buf, "# %s\n", line)
		}
		buf.WriteString("\n")
	}
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, fmt.Errorf("encode demo config: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("encode demo config: %w", err)
	}
	return buf.Bytes(), nil
}

// value returns the value node of key in mapping m, or nil.
func value(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// mapping returns the mapping under key in m, adding an empty one when key is missing.
func mapping(m *yaml.Node, key string) *yaml.Node {
	if v := value(m, key); v != nil {
		return v
	}
	v := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, v)
	return v
}

// setScalar sets key in mapping m to the string s, adding the key when missing.
func setScalar(m *yaml.Node, key, s string) {
	if v := value(m, key); v != nil {
		v.Kind, v.Tag, v.Value, v.Style, v.Content = yaml.ScalarNode, "!!str", s, 0, nil
		return
	}
	m.Content = append(m.Content,
		&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key},
		&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s})
}

// shiftPort returns a rewrite.Addr that adds offset to the port and keeps the host.
func shiftPort(offset int) func(string) (string, error) {
	return func(addr string) (string, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return "", fmt.Errorf("address %q: %w", addr, err)
		}
		p, err := strconv.Atoi(port)
		if err != nil {
			return "", fmt.Errorf("address %q: port is not a number", addr)
		}
		if p+offset < 1 || p+offset > 65535 {
			return "", fmt.Errorf("address %q: port %d + offset %d is out of range", addr, p, offset)
		}
		return net.JoinHostPort(host, strconv.Itoa(p+offset)), nil
	}
}

// assignPorts returns a rewrite.Addr that gives each distinct address the next port from
// ports, keeping the host, and fails when ports run out.
func assignPorts(ports []int) func(string) (string, error) {
	given := map[string]string{}
	return func(addr string) (string, error) {
		if a, ok := given[addr]; ok {
			return a, nil
		}
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return "", fmt.Errorf("address %q: %w", addr, err)
		}
		if len(given) >= len(ports) {
			return "", fmt.Errorf("address %q: no free port left", addr)
		}
		a := net.JoinHostPort(host, strconv.Itoa(ports[len(given)]))
		given[addr] = a
		return a, nil
	}
}

// plan is what the demo needs to know of the config it runs.
type plan struct {
	Site      string
	Proxy     string // host:port of client traffic
	Admin     string // host:port of the status page and state API
	Service   string // the one service every backend serves
	Threshold int
	Backends  []planBackend
	Pools     []string // node pools that apps resolve to, sorted
	Hosts     []string // one client Host header per app, in config order
}

// planBackend is one backend of the plan.
type planBackend struct {
	ID, Address, Pool string
}

// newPlan derives the demo's plan from a validated config. The demo serves exactly one
// service, so that every pool file holds one line.
func newPlan(c *configs.Config) (plan, error) {
	if len(c.Services) != 1 {
		return plan{}, fmt.Errorf("demo config declares %d services; the demo needs exactly one", len(c.Services))
	}
	p := plan{Site: c.Site, Proxy: c.Listen, Admin: c.Admin.Listen}
	for name, svc := range c.Services {
		p.Service, p.Threshold = name, svc.WarningThreshold
	}
	for _, b := range c.Backends {
		pool, _ := configs.BackendPool(b)
		p.Backends = append(p.Backends, planBackend{ID: b.ID, Address: b.Address, Pool: pool})
	}
	for _, a := range c.Apps {
		pool, _, _ := configs.AppPool(a)
		if !slices.Contains(p.Pools, pool) {
			p.Pools = append(p.Pools, pool)
		}
		if len(a.Hosts) > 0 {
			p.Hosts = append(p.Hosts, clientHost(a.Hosts[0]))
		}
	}
	slices.Sort(p.Pools)
	if len(p.Backends) == 0 || len(p.Hosts) == 0 {
		return plan{}, fmt.Errorf("demo config needs backends and apps")
	}
	return p, nil
}

// clientHost turns an app's host pattern into a Host header that matches it: an exact name
// as is, "*.example.com" as "demo.example.com", and "*" as "www.localhost".
func clientHost(pattern string) string {
	switch {
	case pattern == "*":
		return "www.localhost"
	case strings.HasPrefix(pattern, "*."):
		return "demo." + pattern[2:]
	}
	return pattern
}
