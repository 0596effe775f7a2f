package configs

import (
	"slices"
	"strings"
	"testing"
)

// baseYAML is a small valid configuration that tests mutate.
const baseYAML = `
site: test
services:
  web: {}
apps:
  - name: shop
    hosts: [shop.example.com]
    service: web
backends:
  - id: web-1
    address: 127.0.0.1:9001
  - id: web-2
    address: 127.0.0.1:9002
`

// baseConfig parses baseYAML; each call returns a new Config.
func baseConfig(t *testing.T) *Config {
	t.Helper()
	c, err := Parse([]byte(baseYAML))
	if err != nil {
		t.Fatalf("baseYAML: %v", err)
	}
	return c
}

// wantProblems fails unless err holds exactly the want problems, in order.
func wantProblems(t *testing.T, err error, want ...string) {
	t.Helper()
	got := Problems(err)
	if !slices.Equal(got, want) {
		t.Errorf("problems:\n  got  %q\n  want %q", got, want)
	}
}

// yamlWith returns baseYAML with extra appended (top-level keys that baseYAML lacks).
func yamlWith(extra string) []byte {
	return []byte(baseYAML + strings.TrimLeft(extra, "\n"))
}

func boolPtr(b bool) *bool { return &b }
