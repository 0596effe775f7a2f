package configs

import (
	"reflect"
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

// problemCase is a document and the problems Parse should find in it, in order (none: the
// document is valid).
type problemCase struct {
	name string
	doc  string
	want []string
}

// checkProblems parses prefix followed by each case's document, in a subtest named by the case,
// and fails the case unless Parse finds exactly its problems. prefix is baseYAML for cases that
// add keys to it, "" for cases that are whole documents.
func checkProblems(t *testing.T, prefix string, cases []problemCase) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(prefix + tt.doc))
			wantProblems(t, err, tt.want...)
		})
	}
}

// fieldCase is a value read from a parsed configuration, named by its key, and the value it should
// be.
type fieldCase struct {
	name string
	got  any
	want any
}

// checkFields fails, in a subtest named by the field, each field whose value is not the one
// it should be.
func checkFields(t *testing.T, fields []fieldCase) {
	t.Helper()
	for _, f := range fields {
		t.Run(f.name, func(t *testing.T) {
			if !reflect.DeepEqual(f.got, f.want) {
				t.Errorf("got %#v, want %#v", f.got, f.want)
			}
		})
	}
}

// yamlWith returns baseYAML with extra appended (top-level keys that baseYAML lacks).
func yamlWith(extra string) []byte {
	return []byte(baseYAML + strings.TrimLeft(extra, "\n"))
}

func boolPtr(b bool) *bool { return &b }
