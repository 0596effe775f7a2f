package configs

import (
	"slices"
	"testing"
	"time"
)

// admin.store.etcd: defaults, strict keys, and every problem with its line.
func TestParseEtcdStore(t *testing.T) {
	tests := []problemCase{
		{name: "endpoints only",
			doc: "admin:\n  store:\n    etcd:\n      endpoints: [127.0.0.1:2379, etcd-2.example.com:2379]\n"},
		{name: "everything",
			doc: "admin:\n  store:\n    etcd:\n      endpoints: [\"127.0.0.1:2379\"]\n      prefix: /fleet/eu/\n      dial_timeout: 500ms\n" +
				"      username: pollbal\n      password_file: /etc/pollbal/etcd-password\n" +
				"      ca_file: ca.pem\n      cert_file: c.pem\n      key_file: c.key\n"},
		{name: "no endpoints",
			doc:  "admin:\n  store:\n    etcd:\n      prefix: /p/\n",
			want: []string{"admin.store.etcd.endpoints: at least one endpoint (host:port) required"}},
		{name: "an endpoint is a URL",
			doc:  "admin:\n  store:\n    etcd:\n      endpoints:\n        - http://127.0.0.1:2379\n",
			want: []string{`admin.store.etcd.endpoints[0]: "http://127.0.0.1:2379" is a URL: drop "http://" and any path (want host:port, e.g. 127.0.0.1:2379) (line 18)`}},
		{name: "an endpoint without a port",
			doc:  "admin:\n  store:\n    etcd:\n      endpoints:\n        - 127.0.0.1:2379\n        - etcd-2\n",
			want: []string{"admin.store.etcd.endpoints[1]: missing port (line 19)"}},
		{name: "an endpoint twice",
			doc:  "admin:\n  store:\n    etcd:\n      endpoints: [localhost:2379, 127.0.0.1:2379]\n",
			want: []string{`admin.store.etcd.endpoints[1]: "127.0.0.1:2379" is already listed as endpoints[0] (line 17)`}},
		{name: "an endpoint must be a string",
			doc:  "admin:\n  store:\n    etcd:\n      endpoints: [[a]]\n",
			want: []string{"admin.store.etcd.endpoints[0]: must be a string, got a list (line 17)"}},
		{name: "prefix without a trailing slash",
			doc:  "admin:\n  store:\n    etcd:\n      endpoints: [127.0.0.1:2379]\n      prefix: /pollbal\n",
			want: []string{`admin.store.etcd.prefix: "/pollbal" must end with "/" (line 18)`}},
		{name: "empty prefix",
			doc:  "admin:\n  store:\n    etcd:\n      endpoints: [127.0.0.1:2379]\n      prefix: \"\"\n",
			want: []string{`admin.store.etcd.prefix: must not be empty (the default is "/pollbal/") (line 18)`}},
		{name: "bad dial_timeout",
			doc:  "admin:\n  store:\n    etcd:\n      endpoints: [127.0.0.1:2379]\n      dial_timeout: 2\n",
			want: []string{`admin.store.etcd.dial_timeout: "2" is not a Go duration such as 500ms or 1m30s (line 18): time: missing unit in duration "2"`}},
		{name: "zero dial_timeout",
			doc:  "admin:\n  store:\n    etcd:\n      endpoints: [127.0.0.1:2379]\n      dial_timeout: 0s\n",
			want: []string{"admin.store.etcd.dial_timeout: must be > 0 (got 0s) (line 18)"}},
		{name: "username without password_file",
			doc:  "admin:\n  store:\n    etcd:\n      endpoints: [127.0.0.1:2379]\n      username: u\n",
			want: []string{"admin.store.etcd.password_file: required when username is set"}},
		{name: "password_file without username",
			doc:  "admin:\n  store:\n    etcd:\n      endpoints: [127.0.0.1:2379]\n      password_file: p\n",
			want: []string{"admin.store.etcd.username: required when password_file is set"}},
		{name: "cert_file without key_file",
			doc:  "admin:\n  store:\n    etcd:\n      endpoints: [127.0.0.1:2379]\n      cert_file: c.pem\n",
			want: []string{"admin.store.etcd.key_file: required when cert_file is set"}},
		{name: "unknown key",
			doc:  "admin:\n  store:\n    etcd:\n      endpoints: [127.0.0.1:2379]\n      lease: 5s\n",
			want: []string{"admin.store.etcd.lease: unknown key (line 18)"}},
		// An empty etcd key once read as "no store": the instance silently kept its moves to
		// itself.
		{name: "empty etcd key",
			doc:  "admin:\n  store:\n    etcd:\n",
			want: []string{"admin.store.etcd: is empty: list its endpoints, or remove the key to keep admin moves in this instance only (line 16)"}},
		{name: "null etcd key",
			doc:  "admin:\n  store:\n    etcd: null\n",
			want: []string{"admin.store.etcd: is empty: list its endpoints, or remove the key to keep admin moves in this instance only (line 16)"}},
		{name: "empty etcd key among other problems",
			doc:  "admin:\n  listen: 5\n  store:\n    etcd: ~\n",
			want: []string{"admin.store.etcd: is empty: list its endpoints, or remove the key to keep admin moves in this instance only (line 17)", "admin.listen: missing port (line 15)"}},
		{name: "unknown store kind",
			doc:  "admin:\n  store:\n    consul: {}\n",
			want: []string{"admin.store.consul: unknown key (line 16)"}},
	}
	checkProblems(t, baseYAML, tests)
}

func TestEtcdStoreDefaults(t *testing.T) {
	if c := baseConfig(t); c.Admin.Store.Etcd != nil {
		t.Fatalf("no store configured: got %+v", c.Admin.Store.Etcd)
	}
	c, err := Parse(yamlWith("admin:\n  store:\n    etcd:\n      endpoints: [127.0.0.1:2379]\n"))
	if err != nil {
		t.Fatal(err)
	}
	e := c.Admin.Store.Etcd
	if e == nil {
		t.Fatal("store.etcd not set")
	}
	if !slices.Equal(e.Endpoints, []string{"127.0.0.1:2379"}) || e.Prefix != "/pollbal/" || e.DialTimeout != 2*time.Second {
		t.Errorf("defaults: got %+v", e)
	}
	if e.TLS() {
		t.Error("TLS on without ca_file or cert_file")
	}
}
