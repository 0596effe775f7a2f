package configs

import (
	"errors"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

func TestParseDefaults(t *testing.T) {
	c, err := Parse([]byte(`
site: test
services:
  web:
apps:
  - name: shop
    hosts: [shop.example.com]
backends:
  - address: 127.0.0.1:9001
`))
	if err != nil {
		t.Fatal(err)
	}
	tests := []fieldCase{
		{name: "listen", got: c.Listen, want: "127.0.0.1:8080"},
		{name: "admin.listen", got: c.Admin.Listen, want: "127.0.0.1:9090"},
		{name: "admin.token_file", got: c.Admin.TokenFile, want: ""},
		{name: "admin.state_file", got: c.Admin.StateFile, want: ""},
		{name: "poll.interval", got: c.Poll.Interval, want: time.Second},
		{name: "poll.timeout", got: c.Poll.Timeout, want: 800 * time.Millisecond},
		{name: "poll.fall", got: c.Poll.Fall, want: 1},
		{name: "poll.rise", got: c.Poll.Rise, want: 1},
		{name: "poll.max_backoff", got: c.Poll.MaxBackoff, want: 5 * time.Second},
		{name: "poll.max_body", got: c.Poll.MaxBody, want: 4096},
		{name: "warning.timeout", got: c.Warning.Timeout, want: 500 * time.Millisecond},
		{name: "warning.secret_file", got: c.Warning.SecretFile, want: ""},
		{name: "proxy.backend_timeout", got: c.Proxy.BackendTimeout, want: 30 * time.Second},
		{name: "proxy.max_request_body", got: c.Proxy.MaxRequestBody, want: 10485760},
		{name: "proxy.retries", got: c.Proxy.Retries, want: 1},
		{name: "proxy.eject_after", got: c.Proxy.EjectAfter, want: 3},
		{name: "proxy.eject_on_5xx", got: c.Proxy.EjectOn5xx, want: false},
		{name: "proxy.tie_break", got: c.Proxy.TieBreak, want: "rotate"},
		{name: "proxy.slow_start", got: c.Proxy.SlowStart, want: time.Duration(0)},
		{name: "fleet.instances", got: c.Fleet.Instances, want: 1},
		{name: "services.web (null) threshold", got: c.Services["web"].WarningThreshold, want: 0},
		{name: "services.web (null) scope", got: c.Services["web"].WarningScope, want: "version"},
		{name: "apps[0].service is the only service", got: c.Apps[0].Service, want: "web"},
		{name: "apps[0].pool", got: c.Apps[0].Pool, want: ""},
		{name: "apps[0].owner", got: c.Apps[0].Owner, want: ""},
		{name: "apps[0].allow_fallback_to_default", got: c.Apps[0].AllowFallbackToDefault, want: (*bool)(nil)},
		{name: "backends[0].id is the address", got: c.Backends[0].ID, want: "127.0.0.1:9001"},
		{name: "backends[0].capacity", got: c.Backends[0].Capacity, want: 100},
		{name: "backends[0].pool", got: c.Backends[0].Pool, want: ""},
		{name: "backends[0].owner", got: c.Backends[0].Owner, want: ""},
		{name: "alarms.webhook", got: c.Alarms.Webhook, want: ""},
		{name: "alarms.dedup_window", got: c.Alarms.DedupWindow, want: 5 * time.Minute},
	}
	checkFields(t, tests)
}

// TestParseEveryKey sets every key to a value other than its default, so that a key the
// decoder forgets to copy shows up as a difference.
func TestParseEveryKey(t *testing.T) {
	c, err := Parse([]byte(`
site: eu-west-1
listen: 0.0.0.0:80
admin:
  listen: 127.0.0.1:81
  token_file: /etc/pollbal/token
  state_file: /var/lib/pollbal/state.json
  max_connections: 32
poll:
  interval: 2s
  timeout: 1500ms
  fall: 3
  rise: 2
  max_backoff: 1m
  max_body: 1024
  restore_max_age: 45s
state_dir: /var/lib/pollbal
warning:
  timeout: 250ms
  secret_file: /etc/pollbal/secret
proxy:
  backend_timeout: 1m30s
  max_request_body: 2048
  retries: 0
  eject_after: 0
  eject_on_5xx: true
  tie_break: id
  slow_start: 20s
  max_connections: 500
  header_timeout: 5s
  client_timeout: 20s
  idle_timeout: 30s
  shutdown_timeout: 15s
  buffer_request_body: 1024
  upgrade_idle_timeout: 10m
  queue_timeout: 2s
  max_queue: 50
  trusted_proxies: ["10.0.0.0/8", "192.168.1.7", "::ffff:10.1.0.0/112"]
services:
  web:
    warning_threshold: 2
    warning_scope: service
  api:
    warning_threshold: 1
apps:
  - name: shop
    hosts: ["Shop.Example.com", "*.shop.example.com"]
    service: web
    pool: pool-acme
    owner: acme
    allow_fallback_to_default: true
backends:
  - id: web-1
    address: 127.0.0.1:9001
    capacity: 64
    pool: canary
    owner: acme
alarms:
  webhook: https://alarms.example.com/hook
  dedup_window: 10m
fleet:
  instances: 3
tls:
  listen: 127.0.0.1:8443
  certificates:
    - cert_file: /etc/pollbal/a.crt
      key_file: /etc/pollbal/a.key
  min_version: 1.3
http2:
  enabled: false
  h2c: true
  max_concurrent_streams: 100
  max_header_bytes: 32768
access_log:
  path: /var/log/pollbal/access.log
  format: combined
  statuses: ["5xx", "429"]
  min_duration: 2s
  sample: 0.25
  buffer: 65536
  headers: [Referer, User-Agent]
`))
	if err != nil {
		t.Fatal(err)
	}
	want := &Config{
		Site:   "eu-west-1",
		Listen: "0.0.0.0:80",
		Admin:  Admin{Listen: "127.0.0.1:81", TokenFile: "/etc/pollbal/token", StateFile: "/var/lib/pollbal/state.json", MaxConnections: 32},
		Poll: Poll{Interval: 2 * time.Second, Timeout: 1500 * time.Millisecond, Fall: 3, Rise: 2, MaxBackoff: time.Minute, MaxBody: 1024,
			RestoreMaxAge: 45 * time.Second},
		StateDir: "/var/lib/pollbal",
		Warning:  Warning{Timeout: 250 * time.Millisecond, SecretFile: "/etc/pollbal/secret"},
		Proxy: Proxy{BackendTimeout: 90 * time.Second, MaxRequestBody: 2048, Retries: 0, EjectAfter: 0, EjectOn5xx: true,
			TieBreak: TieBreakID, SlowStart: 20 * time.Second,
			MaxConnections: 500, HeaderTimeout: 5 * time.Second, ClientTimeout: 20 * time.Second,
			IdleTimeout: 30 * time.Second, ShutdownTimeout: 15 * time.Second, BufferRequestBody: 1024,
			UpgradeIdleTimeout: 10 * time.Minute,
			QueueTimeout:       2 * time.Second,
			MaxQueue:           50,
			TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"),
				netip.MustParsePrefix("192.168.1.7/32"), netip.MustParsePrefix("10.1.0.0/16")}},
		Services: map[string]Service{
			"web": {WarningThreshold: 2, WarningScope: ScopeService},
			"api": {WarningThreshold: 1, WarningScope: ScopeVersion},
		},
		Apps: []App{{Name: "shop", Hosts: []string{"shop.example.com", "*.shop.example.com"}, Service: "web",
			Pool: "pool-acme", Owner: "acme", AllowFallbackToDefault: boolPtr(true)}},
		Backends: []Backend{{ID: "web-1", Address: "127.0.0.1:9001", Capacity: 64, Pool: "canary", Owner: "acme"}},
		Alarms:   Alarms{Webhook: "https://alarms.example.com/hook", DedupWindow: 10 * time.Minute},
		Fleet:    Fleet{Instances: 3},
		TLS: TLS{Listen: "127.0.0.1:8443", MinVersion: TLSVersion13,
			Certificates: []Certificate{{CertFile: "/etc/pollbal/a.crt", KeyFile: "/etc/pollbal/a.key"}}},
		HTTP2: HTTP2{Enabled: false, H2C: true, MaxConcurrentStreams: 100, MaxHeaderBytes: 32768},
		AccessLog: AccessLog{Path: "/var/log/pollbal/access.log", Format: FormatCombined,
			Statuses: []string{"5xx", "429"}, MinDuration: 2 * time.Second, Sample: 0.25, Buffer: 65536,
			Headers: []string{"Referer", "User-Agent"}},
	}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("Parse:\n got  %+v\n want %+v", c, want)
	}
}

func TestParseExplicitZeroIsKept(t *testing.T) {
	tests := []problemCase{
		{name: "capacity 0", doc: "site: test\nservices: {web: {}}\nbackends:\n  - address: 127.0.0.1:9001\n    capacity: 0\n",
			want: []string{"backends[0].capacity: must be >= 1 (got 0) (line 5)"}},
		{name: "poll fall 0", doc: baseYAML + "poll:\n  fall: 0\n", want: []string{"poll.fall: must be >= 1 (got 0) (line 15)"}},
		{name: "poll rise 0", doc: baseYAML + "poll:\n  rise: 0\n", want: []string{"poll.rise: must be >= 1 (got 0) (line 15)"}},
		{name: "poll max_body 0", doc: baseYAML + "poll:\n  max_body: 0\n", want: []string{"poll.max_body: must be >= 1 (got 0) (line 15)"}},
		{name: "poll interval 0s", doc: baseYAML + "poll:\n  interval: 0s\n", want: []string{"poll.interval: must be > 0 (got 0s) (line 15)"}},
		{name: "warning timeout 0s", doc: baseYAML + "warning:\n  timeout: 0s\n", want: []string{"warning.timeout: must be > 0 (got 0s) (line 15)"}},
		{name: "max_request_body 0", doc: baseYAML + "proxy:\n  max_request_body: 0\n", want: []string{"proxy.max_request_body: must be >= 1 (got 0) (line 15)"}},
		{name: "dedup_window 0s", doc: baseYAML + "alarms:\n  dedup_window: 0s\n", want: []string{"alarms.dedup_window: must be > 0 (got 0s) (line 15)"}},
		{name: "empty listen", doc: baseYAML + "listen: \"\"\n", want: []string{"listen: required (it may be empty only when tls.listen is set) (line 14)"}},
		{name: "empty admin listen", doc: baseYAML + "admin:\n  listen: ''\n", want: []string{"admin.listen: required (line 15)"}},
		{name: "empty tie_break", doc: baseYAML + "proxy:\n  tie_break: \"\"\n", want: []string{`proxy.tie_break: must be "rotate" or "id" (got "") (line 15)`}},
		{name: "empty warning_scope", doc: "site: test\nservices:\n  web:\n    warning_scope: \"\"\n",
			want: []string{`services.web.warning_scope: must be "version" or "service" (got "") (line 4)`}},
		{name: "empty backend id", doc: "site: test\nservices: {web: {}}\nbackends:\n  - id: \"\"\n    address: 127.0.0.1:9001\n",
			want: []string{"backends[0].id: required (line 4)"}},
		{name: "empty app service", doc: "site: test\nservices: {web: {}}\napps:\n  - name: www\n    hosts: [\"*\"]\n    service: \"\"\n",
			want: []string{"apps[0].service: required (line 6)"}},
		{name: "zeros that are valid", doc: baseYAML + "proxy:\n  retries: 0\n  eject_after: 0\n  slow_start: 0\n"},
		{name: "zero threshold is valid", doc: "site: test\nservices:\n  web:\n    warning_threshold: 0\n"},
	}
	checkProblems(t, "", tests)
}

func TestParseNullIsAbsent(t *testing.T) {
	c, err := Parse([]byte(`
site: test
listen:
admin:
poll:
  interval: ~
services:
  web:
apps:
  - name: shop
    hosts: [shop.example.com]
    allow_fallback_to_default: null
backends:
  - address: 127.0.0.1:9001
    capacity:
`))
	if err != nil {
		t.Fatal(err)
	}
	tests := []fieldCase{
		{name: "listen", got: c.Listen, want: defaultListen},
		{name: "http2.enabled", got: c.HTTP2.Enabled, want: true},
		{name: "http2.h2c", got: c.HTTP2.H2C, want: false},
		{name: "http2.max_concurrent_streams", got: c.HTTP2.MaxConcurrentStreams, want: 250},
		{name: "http2.max_header_bytes", got: c.HTTP2.MaxHeaderBytes, want: 65536},
		{name: "admin.listen", got: c.Admin.Listen, want: defaultAdminListen},
		{name: "poll.interval", got: c.Poll.Interval, want: defaultPollInterval},
		{name: "allow_fallback_to_default", got: c.Apps[0].AllowFallbackToDefault, want: (*bool)(nil)},
		{name: "capacity", got: c.Backends[0].Capacity, want: DefaultCapacity},
	}
	checkFields(t, tests)
}

func TestParseDurations(t *testing.T) {
	tests := []struct {
		name  string
		value string
		want  time.Duration
	}{
		{name: "milliseconds", value: "250ms", want: 250 * time.Millisecond},
		{name: "fractional seconds", value: "1.5s", want: 1500 * time.Millisecond},
		{name: "compound", value: "1m30s", want: 90 * time.Second},
		{name: "hours", value: "2h", want: 2 * time.Hour},
		{name: "microseconds", value: "1500us", want: 1500 * time.Microsecond},
		{name: "quoted", value: `"45s"`, want: 45 * time.Second},
		{name: "bare zero", value: "0", want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse(yamlWith("proxy:\n  slow_start: " + tt.value + "\n"))
			if err != nil {
				t.Fatal(err)
			}
			if c.Proxy.SlowStart != tt.want {
				t.Errorf("slow_start = %v, want %v", c.Proxy.SlowStart, tt.want)
			}
		})
	}
}

func TestParseBadValues(t *testing.T) {
	tests := []problemCase{
		{name: "unknown duration unit", doc: "poll:\n  interval: 5x\n", want: []string{
			`poll.interval: "5x" is not a Go duration such as 500ms or 1m30s (line 15): time: unknown unit "x" in duration "5x"`}},
		{name: "duration without unit", doc: "poll:\n  max_backoff: 5\n", want: []string{
			`poll.max_backoff: "5" is not a Go duration such as 500ms or 1m30s (line 15): time: missing unit in duration "5"`}},
		{name: "duration with a space", doc: "warning:\n  timeout: 1 s\n", want: []string{
			`warning.timeout: "1 s" is not a Go duration such as 500ms or 1m30s (line 15): time: unknown unit " s" in duration "1 s"`}},
		{name: "duration as a list", doc: "alarms:\n  dedup_window: [5m]\n", want: []string{
			"alarms.dedup_window: must be a duration, got a list (line 15)"}},
		{name: "fractional integer", doc: "poll:\n  fall: 1.5\n", want: []string{
			`poll.fall: must be an integer, got "1.5" (line 15)`}},
		{name: "quoted integer", doc: "poll:\n  rise: \"2\"\n", want: []string{
			`poll.rise: must be an integer, got "2" (line 15)`}},
		{name: "integer as text", doc: "proxy:\n  retries: many\n", want: []string{
			`proxy.retries: must be an integer, got "many" (line 15)`}},
		{name: "huge integer", doc: "proxy:\n  max_request_body: 99999999999999999999\n", want: []string{
			`proxy.max_request_body: must be an integer, got "99999999999999999999" (line 15)`}},
		{name: "string as a mapping", doc: "alarms:\n  webhook: {url: x}\n", want: []string{
			"alarms.webhook: must be a string, got a mapping (line 15)"}},
		{name: "section as a list", doc: "poll: [1s]\n", want: []string{
			"poll: must be a mapping, got a list (line 14)"}},
		{name: "section as a scalar", doc: "proxy: fast\n", want: []string{
			"proxy: must be a mapping, got a string (line 14)"}},
		{name: "trusted proxy not a CIDR", doc: "proxy:\n  trusted_proxies: [10.0.0.0/8, 10.0.0.300/8, proxy.local]\n", want: []string{
			`proxy.trusted_proxies[1]: "10.0.0.300/8" is not a CIDR such as 10.0.0.0/8 or an IP address (line 15)`,
			`proxy.trusted_proxies[2]: "proxy.local" is not a CIDR such as 10.0.0.0/8 or an IP address (line 15)`}},
		{name: "trusted proxy CIDR with host bits or a zone", doc: "proxy:\n  trusted_proxies: [10.1.2.3/16, \"fe80::1%eth0\"]\n", want: []string{
			`proxy.trusted_proxies[0]: "10.1.2.3/16" has address bits past its /16: write 10.1.0.0/16 for the network, or 10.1.2.3/32 for the one address (line 15)`,
			`proxy.trusted_proxies[1]: "fe80::1%eth0" has an IPv6 zone: trusted proxies are matched by address alone (line 15)`}},
		{name: "trusted proxies as a string", doc: "proxy:\n  trusted_proxies: 10.0.0.0/8\n", want: []string{
			`proxy.trusted_proxies: must be a list, got a string (line 15)`}},
		{name: "negative connection limit", doc: "proxy:\n  max_connections: 0\n  header_timeout: 0s\n", want: []string{
			"proxy.max_connections: must be >= 1 (got 0) (line 15)", "proxy.header_timeout: must be > 0 (got 0s) (line 16)"}},
		{name: "eject_on_5xx not a boolean", doc: "proxy:\n  eject_on_5xx: sometimes\n", want: []string{
			`proxy.eject_on_5xx: must be true or false, got "sometimes" (line 15)`}},
		{name: "admin connection limit below 1", doc: "admin:\n  max_connections: 0\n", want: []string{
			"admin.max_connections: must be >= 1 (got 0) (line 15)"}},
		{name: "valid value for contrast", doc: "alarms:\n  dedup_window: 1m\n", want: nil},
	}
	checkProblems(t, baseYAML, tests)
}

func TestParseListShapes(t *testing.T) {
	tests := []problemCase{
		{name: "apps as a mapping", doc: "site: test\nservices: {web: {}}\napps: {shop: {}}\n", want: []string{
			"apps: must be a list, got a mapping (line 3)"}},
		{name: "hosts as a string", doc: "site: test\nservices: {web: {}}\napps:\n  - name: shop\n    hosts: shop.example.com\n", want: []string{
			"apps[0].hosts: must be a list, got a string (line 5)"}},
		{name: "host as a list", doc: "site: test\nservices: {web: {}}\napps:\n  - name: shop\n    hosts: [[a]]\n", want: []string{
			"apps[0].hosts[0]: must be a string, got a list (line 5)"}},
		{name: "service as a scalar", doc: "site: test\nservices:\n  web: 2\n", want: []string{
			"services.web: must be a mapping, got an integer (line 3)"}},
		{name: "allow_fallback not a boolean", doc: "site: test\nservices: {web: {}}\napps:\n  - name: shop\n    hosts: [a.b]\n    allow_fallback_to_default: maybe\n", want: []string{
			`apps[0].allow_fallback_to_default: must be true or false, got "maybe" (line 6)`}},
	}
	checkProblems(t, "", tests)
}

func TestParseUnknownKeys(t *testing.T) {
	tests := []problemCase{
		{name: "top level", doc: baseYAML + "sites: eu\n", want: []string{"sites: unknown key (line 14): did you mean site?"}},
		{name: "in a section", doc: baseYAML + "poll:\n  intervall: 2s\n", want: []string{"poll.intervall: unknown key (line 15): did you mean interval?"}},
		{name: "in a nested section", doc: baseYAML + "alarms:\n  dedup_window: 1m\n  webhok: http://x\n",
			want: []string{"alarms.webhok: unknown key (line 16): did you mean webhook?"}},
		{name: "in a service", doc: "site: test\nservices:\n  web:\n    threshold: 2\n",
			want: []string{"services.web.threshold: unknown key (line 4)"}},
		{name: "in an app", doc: "site: test\nservices: {web: {}}\napps:\n  - name: shop\n    hosts: [a.b]\n    fallback: true\n",
			want: []string{"apps[0].fallback: unknown key (line 6)"}},
		{name: "in a backend", doc: "site: test\nservices: {web: {}}\nbackends:\n  - address: 127.0.0.1:9003\n    capcity: 3\n",
			want: []string{"backends[0].capcity: unknown key (line 5): did you mean capacity?"}},
		// Issue 28: unknown keys named no near miss.
		{name: "a letter left out", doc: baseYAML + "proxy:\n  queue_timout: 1s\n",
			want: []string{"proxy.queue_timout: unknown key (line 15): did you mean queue_timeout?"}},
		{name: "two letters swapped, under the etcd store", doc: baseYAML + "admin:\n  store:\n    etcd:\n      endpionts: [127.0.0.1:2379]\n",
			want: []string{"admin.store.etcd.endpionts: unknown key (line 17): did you mean endpoints?", "admin.store.etcd.endpoints: at least one endpoint (host:port) required"}},
		{name: "upper case", doc: baseYAML + "Site: x\n",
			want: []string{"Site: unknown key (line 14): did you mean site?"}},
		{name: "a key of another section is not suggested", doc: baseYAML + "poll:\n  retries: 2\n",
			want: []string{"poll.retries: unknown key (line 15)"}},
		{name: "too far from every key", doc: baseYAML + "proxy:\n  queue: 10\n",
			want: []string{"proxy.queue: unknown key (line 15)"}},
	}
	checkProblems(t, "", tests)
}

func TestNearestKey(t *testing.T) {
	known := []string{"timeout", "interval", "fall", "rise", "max_body", "max_backoff"}
	for _, tc := range []struct {
		word, want string
	}{
		{word: "timout", want: "timeout"},
		{word: "timeuot", want: "timeout"},
		{word: "intrval", want: "interval"},
		{word: "max_bdy", want: "max_body"},
		{word: "max_b", want: ""},   // a third of 5 is 1: max_body and max_backoff are too far
		{word: "fal", want: "fall"}, // three letters allow one edit
		{word: "fl", want: ""},      // two letters allow none
		{word: "max_bodyy", want: "max_body"},
		{word: "retries", want: ""},
		{word: "mux_body", want: "max_body"},
	} {
		got, _ := nearestKey(tc.word, known)
		if got != tc.want {
			t.Errorf("nearestKey(%q) = %q, want %q", tc.word, got, tc.want)
		}
	}
	// Two keys equally near: neither is suggested.
	if got, ok := nearestKey("fast", []string{"last", "east"}); ok {
		t.Errorf("nearestKey(fast, [last east]) = %q, want no suggestion", got)
	}
}

func TestEditDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"a", "", 1}, {"", "ab", 2}, {"same", "same", 0},
		{"queue_timout", "queue_timeout", 1}, {"ab", "ba", 1}, {"abc", "acb", 1},
		{"kitten", "sitting", 3}, {"ca", "abc", 3},
	} {
		if got := editDistance(tc.a, tc.b); got != tc.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestParseBackendUnknownKeyKeepsOtherProblems(t *testing.T) {
	_, err := Parse([]byte(`site: test
services: {web: {}}
apps: [{name: shop, hosts: [a.example.com]}]
backends:
  - address: 127.0.0.1:9001
  - address: 127.0.0.1
    capcity: 3
`))
	wantProblems(t, err,
		"backends[1].capcity: unknown key (line 7): did you mean capacity?",
		"backends[1].address: missing port (line 6)",
	)
}

func TestParseDocuments(t *testing.T) {
	tests := []problemCase{
		{name: "empty input", doc: "", want: []string{"site: required", "services: at least one service required"}},
		{name: "only comments", doc: "# nothing yet\n", want: []string{"site: required", "services: at least one service required"}},
		{name: "leading marker is one document", doc: "---\n" + baseYAML},
		{name: "two documents", doc: baseYAML + "---\n" + baseYAML, want: []string{
			"parse config: the file holds more than one YAML document; want exactly one"}},
		{name: "trailing empty document", doc: baseYAML + "---\n", want: []string{
			"parse config: the file holds more than one YAML document; want exactly one"}},
		{name: "broken second document", doc: baseYAML + "---\n[\n", want: []string{
			"parse config: the file holds more than one YAML document; want exactly one: yaml: line 15: did not find expected node content"}},
		{name: "syntax error", doc: "site: [test\n", want: []string{
			"parse config: yaml: line 1: did not find expected ',' or ']'"}},
		{name: "top level list", doc: "- site: test\n", want: []string{"top level: must be a mapping, got a list (line 1)"}},
		{name: "top level scalar", doc: "pollbal\n", want: []string{"top level: must be a mapping, got a string (line 1)"}},
		// yaml.v3 quotes the value in its message; a value over two lines was split into two
		// problems naming Go types, followed by "site: required".
		{name: "top level scalar over two lines", doc: "\"first\n\n  second\"\n", want: []string{
			"top level: must be a mapping, got a string (line 1)"}},
		{name: "duplicate key", doc: "site: a\nsite: b\n", want: []string{"site: key written twice (lines 1 and 2)"}},
	}
	checkProblems(t, "", tests)
}

func TestParseAppService(t *testing.T) {
	tests := []struct {
		name     string
		services string
		service  string
		want     string
		problems []string
	}{
		{name: "omitted with one service", services: "web: {}", want: "web"},
		{name: "explicit with one service", services: "web: {}", service: "web", want: "web"},
		{name: "explicit among two", services: "web: {}\n  api: {}", service: "api", want: "api"},
		{name: "omitted among two", services: "web: {}\n  api: {}",
			problems: []string{"apps[0].service: required when more than one service is declared"}},
		{name: "undeclared", services: "web: {}", service: "api",
			problems: []string{`apps[0].service: "api" is not a declared service (line 7)`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := "site: test\nservices:\n  " + tt.services + "\napps:\n  - name: shop\n    hosts: [a.example.com]\n"
			if tt.service != "" {
				doc += "    service: " + tt.service + "\n"
			}
			c, err := Parse([]byte(doc))
			wantProblems(t, err, tt.problems...)
			if err == nil && c.Apps[0].Service != tt.want {
				t.Errorf("service = %q, want %q", c.Apps[0].Service, tt.want)
			}
		})
	}
}

func TestParseListDefaults(t *testing.T) {
	c, err := Parse([]byte(`
site: test
services: {web: {}}
apps:
  - name: shop
    hosts: ["SHOP.Example.COM", "*.Shop.example.com", "*"]
backends:
  - address: 127.0.0.1:9001
  - id: web-2
    address: 127.0.0.1:9002
    capacity: 7
`))
	if err != nil {
		t.Fatal(err)
	}
	tests := []fieldCase{
		{name: "hosts lower-cased", got: c.Apps[0].Hosts, want: []string{"shop.example.com", "*.shop.example.com", "*"}},
		{name: "id defaults to the address", got: c.Backends[0].ID, want: "127.0.0.1:9001"},
		{name: "capacity defaults to 100", got: c.Backends[0].Capacity, want: 100},
		{name: "explicit id kept", got: c.Backends[1].ID, want: "web-2"},
		{name: "explicit capacity kept", got: c.Backends[1].Capacity, want: 7},
	}
	checkFields(t, tests)
}

func TestParseEveryProblemAtOnce(t *testing.T) {
	_, err := Parse([]byte(`
site: ""
listen: 127.0.0.1
poll:
  interval: 1s
  timeout: 2s
  fall: 0
  retry: 3
proxy:
  tie_break: random
services:
  web: {warning_scope: pool}
apps:
  - name: Shop
    hosts: ["http://shop.example.com"]
    service: api
backends:
  - address: 127.0.0.1:9001
    capacity: 0
  - address: 127.0.0.1:9001
  - id: bad id
    address: 127.0.0.1
alarms:
  dedup_window: forever
`))
	wantProblems(t, err,
		"poll.retry: unknown key (line 8)",
		`alarms.dedup_window: "forever" is not a Go duration such as 500ms or 1m30s (line 24): time: invalid duration "forever"`,
		"site: required (line 2)",
		"listen: missing port (line 3)",
		"poll.timeout: must be less than poll.interval (1s) (line 6)",
		"poll.fall: must be >= 1 (got 0) (line 7)",
		`proxy.tie_break: must be "rotate" or "id" (got "random") (line 10)`,
		`services.web.warning_scope: must be "version" or "service" (got "pool") (line 12)`,
		`apps[0].name: "Shop" must match [a-z0-9][a-z0-9_.-]{0,62} (line 14)`,
		`apps[0].hosts[0]: "http://shop.example.com": must be a host name without a scheme (line 15)`,
		`apps[0].service: "api" is not a declared service (line 16)`,
		"backends[0].capacity: must be >= 1 (got 0) (line 19)",
		`backends[1].id: "127.0.0.1:9001" is already used by backends[0]`,
		`backends[1].address: "127.0.0.1:9001" is already used by backends[0] (line 20)`,
		`backends[2].id: "bad id" must match [A-Za-z0-9][A-Za-z0-9_.-]{0,63} (or equal the address) (line 21)`,
		"backends[2].address: missing port (line 22)",
	)
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(good, []byte(baseYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("site: test\nlisten: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		path     string
		problems []string
		errText  string
		isErr    error
	}{
		{name: "valid file", path: good},
		{name: "invalid file", path: bad,
			problems: []string{"listen: missing port (line 2)", "services: at least one service required"},
			errText:  "load config " + bad + ": 2 problems: listen: missing port (line 2); services: at least one service required"},
		{name: "missing file", path: filepath.Join(dir, "none.yaml"), isErr: fs.ErrNotExist,
			problems: []string{"load config: stat " + filepath.Join(dir, "none.yaml") + ": no such file or directory"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Load(tt.path)
			wantProblems(t, err, tt.problems...)
			if err == nil && c.Site != "test" {
				t.Errorf("site = %q, want test", c.Site)
			}
			if tt.errText != "" && (err == nil || err.Error() != tt.errText) {
				t.Errorf("error = %v, want %q", err, tt.errText)
			}
			if tt.isErr != nil && !errors.Is(err, tt.isErr) {
				t.Errorf("error %v is not %v", err, tt.isErr)
			}
		})
	}
}

func TestProblems(t *testing.T) {
	c := baseConfig(t)
	c.Site, c.Listen = "", "x"
	tests := []struct {
		name string
		err  error
		want []string
	}{
		{name: "nil", err: nil, want: nil},
		{name: "plain error", err: errors.New("open x: permission denied"), want: []string{"open x: permission denied"}},
		{name: "multi-line error", err: errors.New("first\n\n  second\n"), want: []string{"first", "second"}},
		{name: "validation list", err: c.Validate(), want: []string{"site: required", "listen: missing port"}},
		{name: "wrapped validation list", err: wrapErr(c.Validate()), want: []string{"site: required", "listen: missing port"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Problems(tt.err)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Problems = %q, want %q", got, tt.want)
			}
		})
	}
}

func wrapErr(err error) error { return errors.Join(errors.New("reload"), err) }
