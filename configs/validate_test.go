package configs

import (
	"strings"
	"testing"
	"time"
)

func TestValidateRules(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(c *Config)
		want   []string
	}{
		{name: "site required", mutate: func(c *Config) { c.Site = "" }, want: []string{"site: required"}},
		{name: "queue timeout negative", mutate: func(c *Config) { c.Proxy.QueueTimeout = -time.Second },
			want: []string{"proxy.queue_timeout: must be >= 0 (got -1s)"}},
		{name: "max queue zero", mutate: func(c *Config) { c.Proxy.MaxQueue = 0 },
			want: []string{"proxy.max_queue: must be >= 1 (got 0)"}},
		{name: "queue on", mutate: func(c *Config) { c.Proxy.QueueTimeout = 2 * time.Second; c.Proxy.MaxQueue = 1 }},
		{name: "site grammar", mutate: func(c *Config) { c.Site = "eu west" },
			want: []string{`site: "eu west" must match [A-Za-z0-9][A-Za-z0-9_.-]{0,63}`}},
		{name: "site too long", mutate: func(c *Config) { c.Site = strings.Repeat("a", 65) },
			want: []string{`site: "` + strings.Repeat("a", 65) + `" must match [A-Za-z0-9][A-Za-z0-9_.-]{0,63}`}},
		{name: "site leading dot", mutate: func(c *Config) { c.Site = ".eu" },
			want: []string{`site: ".eu" must match [A-Za-z0-9][A-Za-z0-9_.-]{0,63}`}},

		{name: "listen required", mutate: func(c *Config) { c.Listen = "" }, want: []string{"listen: required (it may be empty only when tls.listen is set)"}},
		{name: "listen missing port", mutate: func(c *Config) { c.Listen = "127.0.0.1" }, want: []string{"listen: missing port"}},
		{name: "listen named port", mutate: func(c *Config) { c.Listen = "127.0.0.1:http" },
			want: []string{`listen: port "http" must be a number from 1 to 65535`}},
		{name: "listen port zero", mutate: func(c *Config) { c.Listen = "127.0.0.1:0" },
			want: []string{`listen: port "0" must be a number from 1 to 65535`}},
		{name: "listen port too big", mutate: func(c *Config) { c.Listen = "127.0.0.1:65536" },
			want: []string{`listen: port "65536" must be a number from 1 to 65535`}},
		{name: "listen signed port", mutate: func(c *Config) { c.Listen = "127.0.0.1:+80" },
			want: []string{`listen: port "+80" must be a number from 1 to 65535`}},
		{name: "listen bad host", mutate: func(c *Config) { c.Listen = "local host:80" },
			want: []string{`listen: invalid host "local host"`}},
		{name: "listen too many colons", mutate: func(c *Config) { c.Listen = "::1:80" },
			want: []string{`listen: invalid address "::1:80": address ::1:80: too many colons in address`}},
		{name: "admin listen missing port", mutate: func(c *Config) { c.Admin.Listen = "localhost" },
			want: []string{"admin.listen: missing port"}},
		{name: "admin listen equals listen", mutate: func(c *Config) { c.Admin.Listen = c.Listen },
			want: []string{"admin.listen: must differ from listen (127.0.0.1:8080)"}},
		{name: "admin listen wildcard on the same port", mutate: func(c *Config) { c.Admin.Listen = ":8080" },
			want: []string{"admin.listen: must differ from listen (127.0.0.1:8080)"}},
		// Regression: localhost and 127.0.0.1 on one port passed validation and failed at bind.
		{name: "admin listen localhost on the listen port", mutate: func(c *Config) { c.Admin.Listen = "localhost:8080" },
			want: []string{"admin.listen: must differ from listen (127.0.0.1:8080)"}},

		{name: "poll interval zero", mutate: func(c *Config) { c.Poll.Interval = 0 },
			want: []string{"poll.interval: must be > 0 (got 0s)"}},
		{name: "poll interval negative", mutate: func(c *Config) { c.Poll.Interval = -time.Second },
			want: []string{"poll.interval: must be > 0 (got -1s)"}},
		{name: "poll timeout zero", mutate: func(c *Config) { c.Poll.Timeout = 0 },
			want: []string{"poll.timeout: must be > 0 (got 0s)"}},
		{name: "poll timeout equals interval", mutate: func(c *Config) { c.Poll.Timeout = time.Second },
			want: []string{"poll.timeout: must be less than poll.interval (1s)"}},
		{name: "poll timeout above interval", mutate: func(c *Config) { c.Poll.Timeout = 2 * time.Second },
			want: []string{"poll.timeout: must be less than poll.interval (1s)"}},
		{name: "poll max_backoff zero", mutate: func(c *Config) { c.Poll.MaxBackoff = 0 },
			want: []string{"poll.max_backoff: must be > 0 (got 0s)"}},
		{name: "poll max_backoff below interval", mutate: func(c *Config) { c.Poll.MaxBackoff = 500 * time.Millisecond },
			want: []string{"poll.max_backoff: must be at least poll.interval (1s)"}},
		{name: "poll fall zero", mutate: func(c *Config) { c.Poll.Fall = 0 }, want: []string{"poll.fall: must be >= 1 (got 0)"}},
		{name: "poll rise negative", mutate: func(c *Config) { c.Poll.Rise = -1 }, want: []string{"poll.rise: must be >= 1 (got -1)"}},
		{name: "poll max_body zero", mutate: func(c *Config) { c.Poll.MaxBody = 0 }, want: []string{"poll.max_body: must be >= 1 (got 0)"}},
		{name: "poll restore_max_age negative", mutate: func(c *Config) { c.Poll.RestoreMaxAge = -time.Second }, want: []string{"poll.restore_max_age: must be > 0 (got -1s)"}},
		{name: "state_dir off", mutate: func(c *Config) { c.StateDir = "" }},
		{name: "state_dir set", mutate: func(c *Config) { c.StateDir = "/var/lib/pollbal"; c.Admin.StateFile = "/var/lib/pollbal/state.json" }},
		{name: "admin state_file is the runtime state file", mutate: func(c *Config) {
			c.StateDir = "/var/lib/pollbal/"
			c.Admin.StateFile = "/var/lib/pollbal/runtime.json"
		}, want: []string{"admin.state_file: must not be runtime.json in state_dir, where the runtime state is kept"}},

		{name: "warning timeout zero", mutate: func(c *Config) { c.Warning.Timeout = 0 },
			want: []string{"warning.timeout: must be > 0 (got 0s)"}},

		{name: "proxy backend_timeout zero", mutate: func(c *Config) { c.Proxy.BackendTimeout = 0 },
			want: []string{"proxy.backend_timeout: must be > 0 (got 0s)"}},
		{name: "proxy max_request_body zero", mutate: func(c *Config) { c.Proxy.MaxRequestBody = 0 },
			want: []string{"proxy.max_request_body: must be >= 1 (got 0)"}},
		{name: "proxy retries negative", mutate: func(c *Config) { c.Proxy.Retries = -1 },
			want: []string{"proxy.retries: must be >= 0 (got -1)"}},
		{name: "proxy retries over what a request can remember", mutate: func(c *Config) { c.Proxy.Retries = MaxRetries + 1 },
			want: []string{"proxy.retries: must be <= 7 (got 8)"}},
		{name: "proxy eject_after negative", mutate: func(c *Config) { c.Proxy.EjectAfter = -2 },
			want: []string{"proxy.eject_after: must be >= 0 (got -2)"}},
		{name: "proxy tie_break unknown", mutate: func(c *Config) { c.Proxy.TieBreak = "random" },
			want: []string{`proxy.tie_break: must be "rotate" or "id" (got "random")`}},
		{name: "proxy tie_break empty", mutate: func(c *Config) { c.Proxy.TieBreak = "" },
			want: []string{`proxy.tie_break: must be "rotate" or "id" (got "")`}},
		{name: "proxy slow_start negative", mutate: func(c *Config) { c.Proxy.SlowStart = -time.Second },
			want: []string{"proxy.slow_start: must be >= 0 (got -1s)"}},
		{name: "fleet instances zero", mutate: func(c *Config) { c.Fleet.Instances = 0 },
			want: []string{"fleet.instances: must be >= 1 (got 0)"}},
		{name: "fleet instances negative", mutate: func(c *Config) { c.Fleet.Instances = -3 },
			want: []string{"fleet.instances: must be >= 1 (got -3)"}},

		{name: "no services", mutate: func(c *Config) { c.Services = nil },
			want: []string{"services: at least one service required", `apps[0].service: "web" is not a declared service`}},
		{name: "service name grammar", mutate: func(c *Config) { c.Services["-web"] = Service{WarningScope: ScopeVersion} },
			want: []string{`services["-web"]: service name must match [A-Za-z0-9][A-Za-z0-9_.-]{0,63}`}},
		{name: "service threshold negative", mutate: func(c *Config) { c.Services["web"] = Service{WarningThreshold: -1, WarningScope: ScopeVersion} },
			want: []string{"services.web.warning_threshold: must be >= 0 (got -1)"}},
		{name: "service scope unknown", mutate: func(c *Config) { c.Services["web"] = Service{WarningScope: "pool"} },
			want: []string{`services.web.warning_scope: must be "version" or "service" (got "pool")`}},

		{name: "app name required", mutate: func(c *Config) { c.Apps[0].Name = "" }, want: []string{"apps[0].name: required"}},
		{name: "app name grammar", mutate: func(c *Config) { c.Apps[0].Name = "Shop" },
			want: []string{`apps[0].name: "Shop" must match [a-z0-9][a-z0-9_.-]{0,62}`}},
		{name: "app name unique", mutate: func(c *Config) {
			c.Apps = append(c.Apps, App{Name: "shop", Hosts: []string{"other.example.com"}, Service: "web"})
		}, want: []string{`apps[1].name: "shop" is already used by apps[0]`}},
		{name: "app hosts required", mutate: func(c *Config) { c.Apps[0].Hosts = nil },
			want: []string{"apps[0].hosts: at least one host required"}},
		{name: "host pattern empty", mutate: func(c *Config) { c.Apps[0].Hosts = []string{""} },
			want: []string{"apps[0].hosts[0]: empty host pattern"}},
		{name: "host pattern with scheme", mutate: func(c *Config) { c.Apps[0].Hosts = []string{"https://shop.example.com"} },
			want: []string{`apps[0].hosts[0]: "https://shop.example.com": must be a host name without a scheme`}},
		{name: "host pattern with path", mutate: func(c *Config) { c.Apps[0].Hosts = []string{"shop.example.com/cart"} },
			want: []string{`apps[0].hosts[0]: "shop.example.com/cart": must be a host name without a path`}},
		{name: "host pattern with port", mutate: func(c *Config) { c.Apps[0].Hosts = []string{"shop.example.com:8080"} },
			want: []string{`apps[0].hosts[0]: "shop.example.com:8080": must not contain a port (the port in Host is ignored)`}},
		{name: "host pattern ipv6", mutate: func(c *Config) { c.Apps[0].Hosts = []string{"[::1]"} },
			want: []string{`apps[0].hosts[0]: "[::1]": IPv6 literals are not supported as host patterns`}},
		{name: "host pattern upper case", mutate: func(c *Config) { c.Apps[0].Hosts = []string{"Shop.example.com"} },
			want: []string{`apps[0].hosts[0]: "Shop.example.com": must be lower case`}},
		{name: "host pattern inner wildcard", mutate: func(c *Config) { c.Apps[0].Hosts = []string{"shop.*.com"} },
			want: []string{`apps[0].hosts[0]: "shop.*.com": "*" is only allowed alone or as a leading "*."`}},
		{name: "host pattern two wildcards", mutate: func(c *Config) { c.Apps[0].Hosts = []string{"*.*.example.com"} },
			want: []string{`apps[0].hosts[0]: "*.*.example.com": "*" is only allowed alone or as a leading "*."`}},
		{name: "host pattern wildcard without dot", mutate: func(c *Config) { c.Apps[0].Hosts = []string{"*shop.example.com"} },
			want: []string{`apps[0].hosts[0]: "*shop.example.com": "*" is only allowed alone or as a leading "*."`}},
		{name: "host pattern bare wildcard prefix", mutate: func(c *Config) { c.Apps[0].Hosts = []string{"*."} },
			want: []string{`apps[0].hosts[0]: "*.": not a valid host name`}},
		{name: "host pattern empty label", mutate: func(c *Config) { c.Apps[0].Hosts = []string{"shop..com"} },
			want: []string{`apps[0].hosts[0]: "shop..com": not a valid host name`}},
		{name: "host pattern bad character", mutate: func(c *Config) { c.Apps[0].Hosts = []string{"shop!.com"} },
			want: []string{`apps[0].hosts[0]: "shop!.com": not a valid host name`}},
		{name: "host pattern repeats another app", mutate: func(c *Config) {
			c.Apps = append(c.Apps, App{Name: "other", Hosts: []string{"shop.example.com"}, Service: "web"})
		}, want: []string{`apps[1].hosts[0]: "shop.example.com" is already used by apps[0].hosts[0]`}},
		{name: "host pattern repeats the same app", mutate: func(c *Config) {
			c.Apps[0].Hosts = []string{"*", "shop.example.com", "*"}
		}, want: []string{`apps[0].hosts[2]: "*" is already used by apps[0].hosts[0]`}},
		{name: "app service required", mutate: func(c *Config) { c.Apps[0].Service = "" },
			want: []string{"apps[0].service: required"}},
		{name: "app service required among several", mutate: func(c *Config) {
			c.Services["api"] = Service{WarningScope: ScopeVersion}
			c.Apps[0].Service = ""
		}, want: []string{"apps[0].service: required when more than one service is declared"}},
		{name: "app service undeclared", mutate: func(c *Config) { c.Apps[0].Service = "api" },
			want: []string{`apps[0].service: "api" is not a declared service`}},
		{name: "app pool grammar", mutate: func(c *Config) { c.Apps[0].Pool = "Pool-A" },
			want: []string{`apps[0].pool: "Pool-A" must match [a-z0-9][a-z0-9_.-]{0,62}`}},
		{name: "app pool unassigned", mutate: func(c *Config) { c.Apps[0].Pool = PoolUnassigned },
			want: []string{`apps[0].pool: "unassigned" is reserved and cannot be used by an app`}},
		{name: "app owner grammar", mutate: func(c *Config) { c.Apps[0].Owner = "Acme" },
			want: []string{`apps[0].owner: "Acme" gives pool "pool-Acme", which must match [a-z0-9][a-z0-9_.-]{0,62}`}},
		{name: "app owner too long", mutate: func(c *Config) { c.Apps[0].Owner = strings.Repeat("a", 59) },
			want: []string{`apps[0].owner: "` + strings.Repeat("a", 59) + `" gives pool "pool-` + strings.Repeat("a", 59) + `", which must match [a-z0-9][a-z0-9_.-]{0,62}`}},

		{name: "backend id required", mutate: func(c *Config) { c.Backends[0].ID = "" }, want: []string{"backends[0].id: required"}},
		{name: "backend id grammar", mutate: func(c *Config) { c.Backends[0].ID = "web 1" },
			want: []string{`backends[0].id: "web 1" must match [A-Za-z0-9][A-Za-z0-9_.-]{0,63} (or equal the address)`}},
		{name: "backend id unique", mutate: func(c *Config) { c.Backends[1].ID = "web-1" },
			want: []string{`backends[1].id: "web-1" is already used by backends[0]`}},
		{name: "backend address required", mutate: func(c *Config) { c.Backends[1].Address = "" },
			want: []string{"backends[1].address: required"}},
		// Regression: "id: required" was reported too, although the id defaults to the address.
		{name: "backend without id nor address", mutate: func(c *Config) { c.Backends[1].ID, c.Backends[1].Address = "", "" },
			want: []string{"backends[1].address: required"}},
		{name: "backend address missing port", mutate: func(c *Config) { c.Backends[1].Address = "127.0.0.1" },
			want: []string{"backends[1].address: missing port"}},
		{name: "backend address missing host", mutate: func(c *Config) { c.Backends[1].Address = ":9002" },
			want: []string{"backends[1].address: missing host"}},
		{name: "backend address port out of range", mutate: func(c *Config) { c.Backends[1].Address = "127.0.0.1:99999" },
			want: []string{`backends[1].address: port "99999" must be a number from 1 to 65535`}},
		{name: "backend address unique", mutate: func(c *Config) { c.Backends[1].Address = "127.0.0.1:9001" },
			want: []string{`backends[1].address: "127.0.0.1:9001" is already used by backends[0]`}},
		{name: "backend capacity zero", mutate: func(c *Config) { c.Backends[0].Capacity = 0 },
			want: []string{"backends[0].capacity: must be >= 1 (got 0)"}},
		{name: "backend pool grammar", mutate: func(c *Config) { c.Backends[0].Pool = "_canary" },
			want: []string{`backends[0].pool: "_canary" must match [a-z0-9][a-z0-9_.-]{0,62}`}},
		{name: "backend owner grammar", mutate: func(c *Config) { c.Backends[0].Owner = "ac me" },
			want: []string{`backends[0].owner: "ac me" gives pool "pool-ac me", which must match [a-z0-9][a-z0-9_.-]{0,62}`}},

		{name: "webhook relative", mutate: func(c *Config) { c.Alarms.Webhook = "/alarms" },
			want: []string{`alarms.webhook: must be an absolute http or https URL (got "/alarms")`}},
		{name: "webhook other scheme", mutate: func(c *Config) { c.Alarms.Webhook = "ftp://alarms.example.com/" },
			want: []string{`alarms.webhook: must be an absolute http or https URL (got "ftp://alarms.example.com/")`}},
		{name: "webhook without host", mutate: func(c *Config) { c.Alarms.Webhook = "http://" },
			want: []string{`alarms.webhook: must be an absolute http or https URL (got "http://")`}},
		{name: "webhook unparsable", mutate: func(c *Config) { c.Alarms.Webhook = "http://[::1" },
			want: []string{`alarms.webhook: must be an absolute http or https URL: parse "http://[::1": missing ']' in host`}},
		{name: "dedup window zero", mutate: func(c *Config) { c.Alarms.DedupWindow = 0 },
			want: []string{"alarms.dedup_window: must be > 0 (got 0s)"}},

		{name: "http2 streams zero", mutate: func(c *Config) { c.HTTP2.MaxConcurrentStreams = 0 },
			want: []string{"http2.max_concurrent_streams: must be >= 1 (got 0)"}},
		{name: "http2 streams too many", mutate: func(c *Config) { c.HTTP2.MaxConcurrentStreams = MaxHTTP2Streams + 1 },
			want: []string{"http2.max_concurrent_streams: must be <= 10000 (got 10001)"}},
		{name: "http2 header bytes too few", mutate: func(c *Config) { c.HTTP2.MaxHeaderBytes = 1024 },
			want: []string{"http2.max_header_bytes: must be >= 4096 (got 1024)"}},
		{name: "http2 header bytes too many", mutate: func(c *Config) { c.HTTP2.MaxHeaderBytes = 2 << 20 },
			want: []string{"http2.max_header_bytes: must be <= 1048576 (got 2097152)"}},
		{name: "h2c without a plain listener", mutate: func(c *Config) {
			c.HTTP2.H2C, c.Listen, c.TLS.Listen = true, "", "127.0.0.1:8443"
			c.TLS.Certificates = []Certificate{{CertFile: "a.crt", KeyFile: "a.key"}}
		}, want: []string{"http2.h2c: needs the plain listener (listen is empty)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := baseConfig(t)
			tt.mutate(c)
			wantProblems(t, c.Validate(), tt.want...)
		})
	}
}

func TestValidateAccepts(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(c *Config)
	}{
		{name: "base as is", mutate: func(*Config) {}},
		{name: "listen on all interfaces", mutate: func(c *Config) { c.Listen = ":8080" }},
		{name: "listen on ipv6", mutate: func(c *Config) { c.Listen = "[::1]:8080" }},
		{name: "listen on a host name", mutate: func(c *Config) { c.Listen = "LocalHost:8080" }},
		{name: "admin on the same host, other port", mutate: func(c *Config) { c.Admin.Listen = "127.0.0.1:8081" }},
		{name: "admin on the same port, other host", mutate: func(c *Config) { c.Admin.Listen = "127.0.0.2:8080" }},
		{name: "max_backoff equals interval", mutate: func(c *Config) { c.Poll.MaxBackoff = c.Poll.Interval }},
		{name: "no retries, never eject", mutate: func(c *Config) { c.Proxy.Retries, c.Proxy.EjectAfter = 0, 0 }},
		{name: "the most retries", mutate: func(c *Config) { c.Proxy.Retries = MaxRetries }},
		{name: "tie_break id", mutate: func(c *Config) { c.Proxy.TieBreak = TieBreakID }},
		{name: "slow start on", mutate: func(c *Config) { c.Proxy.SlowStart = 10 * time.Second }},
		{name: "scope service", mutate: func(c *Config) { c.Services["web"] = Service{WarningThreshold: 3, WarningScope: ScopeService} }},
		{name: "every host pattern form", mutate: func(c *Config) {
			c.Apps[0].Hosts = []string{"shop.example.com", "*.shop.example.com", "*", "localhost", "127.0.0.1", "my_host.local"}
		}},
		{name: "app pool default", mutate: func(c *Config) { c.Apps[0].Pool = PoolDefault }},
		{name: "app pool and owner", mutate: func(c *Config) { c.Apps[0].Pool, c.Apps[0].Owner = "canary", "acme" }},
		{name: "app owner at max length", mutate: func(c *Config) { c.Apps[0].Owner = strings.Repeat("a", 58) }},
		{name: "backend id equals address", mutate: func(c *Config) { c.Backends[0].ID = c.Backends[0].Address }},
		{name: "backend ipv6 address", mutate: func(c *Config) { c.Backends[0].Address = "[::1]:9001" }},
		{name: "backend host name address", mutate: func(c *Config) { c.Backends[0].Address = "web-1.internal:80" }},
		{name: "backend reserved pools", mutate: func(c *Config) { c.Backends[0].Pool, c.Backends[1].Pool = PoolUnassigned, PoolDefault }},
		{name: "backend owner", mutate: func(c *Config) { c.Backends[0].Owner = "acme" }},
		{name: "webhook https", mutate: func(c *Config) { c.Alarms.Webhook = "https://alarms.example.com/hook?x=1" }},
		{name: "h2c on, http2 off on TLS", mutate: func(c *Config) { c.HTTP2.H2C, c.HTTP2.Enabled = true, false }},
		{name: "http2 bounds", mutate: func(c *Config) {
			c.HTTP2.MaxConcurrentStreams, c.HTTP2.MaxHeaderBytes = MaxHTTP2Streams, MinHTTP2HeaderBytes
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := baseConfig(t)
			tt.mutate(c)
			wantProblems(t, c.Validate())
		})
	}
}

func TestValidateEveryProblemAtOnce(t *testing.T) {
	c := baseConfig(t)
	c.Site = ""
	c.Listen = "127.0.0.1"
	c.Poll.Timeout = 2 * time.Second
	c.Proxy.TieBreak = "random"
	c.Apps[0].Service = "api"
	c.Backends[1].Address = "127.0.0.1"
	c.Backends[1].Capacity = 0
	c.Alarms.DedupWindow = 0
	wantProblems(t, c.Validate(),
		"site: required",
		"listen: missing port",
		"poll.timeout: must be less than poll.interval (1s)",
		`proxy.tie_break: must be "rotate" or "id" (got "random")`,
		"alarms.dedup_window: must be > 0 (got 0s)",
		`apps[0].service: "api" is not a declared service`,
		"backends[1].address: missing port",
		"backends[1].capacity: must be >= 1 (got 0)",
	)
}

func TestValidateDoesNotPanic(t *testing.T) {
	tests := []struct {
		name string
		c    *Config
		want []string
	}{
		{name: "nil config", c: nil, want: []string{"config is nil"}},
		{name: "zero config", c: &Config{}, want: []string{
			"site: required",
			"listen: required (it may be empty only when tls.listen is set)",
			"admin.listen: required",
			"admin.max_connections: must be >= 1 (got 0)",
			`tls.min_version: must be "1.2" or "1.3" (got "")`,
			`http2.max_concurrent_streams: must be >= 1 (got 0)`,
			`http2.max_header_bytes: must be >= 4096 (got 0)`,
			"poll.interval: must be > 0 (got 0s)",
			"poll.timeout: must be > 0 (got 0s)",
			"poll.max_backoff: must be > 0 (got 0s)",
			"poll.fall: must be >= 1 (got 0)",
			"poll.rise: must be >= 1 (got 0)",
			"poll.max_body: must be >= 1 (got 0)",
			"poll.restore_max_age: must be > 0 (got 0s)",
			"warning.timeout: must be > 0 (got 0s)",
			"proxy.backend_timeout: must be > 0 (got 0s)",
			"proxy.max_request_body: must be >= 1 (got 0)",
			`proxy.tie_break: must be "rotate" or "id" (got "")`,
			"proxy.max_connections: must be >= 1 (got 0)",
			"proxy.header_timeout: must be > 0 (got 0s)",
			"proxy.client_timeout: must be > 0 (got 0s)",
			"proxy.idle_timeout: must be > 0 (got 0s)",
			"proxy.shutdown_timeout: must be > 0 (got 0s)",
			"proxy.upgrade_idle_timeout: must be > 0 (got 0s)",
			"proxy.max_queue: must be >= 1 (got 0)",
			"alarms.dedup_window: must be > 0 (got 0s)",
			"fleet.instances: must be >= 1 (got 0)",
			`access_log.format: must be "json" or "combined" (got "")`,
			"access_log.sample: must be > 0 and <= 1 (got 0)",
			"access_log.buffer: must be >= 4096 (got 0)",
			"services: at least one service required",
		}},
		{name: "default config", c: Default(), want: []string{
			"site: required",
			"services: at least one service required",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantProblems(t, tt.c.Validate(), tt.want...)
		})
	}
}

func TestValidateErrorText(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(c *Config)
		want   string
	}{
		{name: "one problem reads as itself", mutate: func(c *Config) { c.Site = "" }, want: "site: required"},
		{name: "several problems on one line", mutate: func(c *Config) { c.Site, c.Listen = "", "x" },
			want: "2 problems: site: required; listen: missing port"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := baseConfig(t)
			tt.mutate(c)
			err := c.Validate()
			if err == nil || err.Error() != tt.want {
				t.Errorf("Validate() = %v, want %q", err, tt.want)
			}
		})
	}
}
