package configs

import (
	"net/netip"
	"time"
)

// Config is the whole pollbal configuration after defaults are applied.
// A *Config returned by Load or Parse is validated and must be treated as read-only:
// it is shared by every component and replaced wholesale on reload.
type Config struct {
	Site     string             `yaml:"site"`
	Listen   string             `yaml:"listen"`
	Admin    Admin              `yaml:"admin"`
	Poll     Poll               `yaml:"poll"`
	Warning  Warning            `yaml:"warning"`
	Proxy    Proxy              `yaml:"proxy"`
	Services map[string]Service `yaml:"services"`
	Apps     []App              `yaml:"apps"`
	Backends []Backend          `yaml:"backends"`
	Alarms   Alarms             `yaml:"alarms"`
	Fleet    Fleet              `yaml:"fleet"`
	TLS      TLS                `yaml:"tls"`
	HTTP2    HTTP2              `yaml:"http2"`

	// StateDir is where the runtime state (readiness, reports, load reports, ejections,
	// warnings) is kept across restarts and upgrades; "" keeps none.
	StateDir string `yaml:"state_dir"`

	// AccessLog says whether and how every request is recorded.
	AccessLog AccessLog `yaml:"access_log"`
}

// Admin configures the admin listener (status page, state API, metrics, admin API).
type Admin struct {
	Listen    string `yaml:"listen"`
	TokenFile string `yaml:"token_file"`
	StateFile string `yaml:"state_file"`
	Store     Store  `yaml:"store"`
	// MaxConnections caps the admin connections open at once; one more is closed at once.
	MaxConnections int `yaml:"max_connections"`
}

// Store says where admin moves are kept. Without Etcd they stay local to this instance (in
// StateFile, or in memory when that is empty).
type Store struct {
	// Etcd, when set, keeps the moves in etcd, shared by every instance that uses its prefix.
	Etcd *Etcd `yaml:"etcd"`
}

// Etcd configures the etcd cluster that holds the fleet's admin moves.
type Etcd struct {
	// Endpoints are the etcd members, each host:port.
	Endpoints []string `yaml:"endpoints"`
	// Prefix starts every key: a move is <Prefix>moves/<backend id>, its value the pool name.
	Prefix      string        `yaml:"prefix"`
	DialTimeout time.Duration `yaml:"dial_timeout"`
	// Username and PasswordFile authenticate to etcd; both or neither.
	Username     string `yaml:"username"`
	PasswordFile string `yaml:"password_file"`
	// CAFile turns TLS on; CertFile and KeyFile (both or neither) add a client certificate.
	CAFile   string `yaml:"ca_file"`
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
}

// TLS reports whether the etcd connection uses TLS.
func (e *Etcd) TLS() bool { return e.CAFile != "" || e.CertFile != "" }

// Poll configures the /pool health checks.
type Poll struct {
	Interval   time.Duration `yaml:"interval"`
	Timeout    time.Duration `yaml:"timeout"`
	Fall       int           `yaml:"fall"`
	Rise       int           `yaml:"rise"`
	MaxBackoff time.Duration `yaml:"max_backoff"`
	MaxBody    int           `yaml:"max_body"`
	// RestoreMaxAge is how old a runtime state in StateDir may be to be restored at start.
	RestoreMaxAge time.Duration `yaml:"restore_max_age"`
}

// Warning configures the POST /pool_warning sender.
type Warning struct {
	Timeout    time.Duration `yaml:"timeout"`
	SecretFile string        `yaml:"secret_file"`
}

// Proxy configures the client-traffic data plane.
type Proxy struct {
	BackendTimeout time.Duration `yaml:"backend_timeout"`
	MaxRequestBody int           `yaml:"max_request_body"`
	Retries        int           `yaml:"retries"`
	EjectAfter     int           `yaml:"eject_after"`
	EjectOn5xx     bool          `yaml:"eject_on_5xx"` // 502/503/504 answers count towards EjectAfter too
	TieBreak       string        `yaml:"tie_break"`    // TieBreakRotate or TieBreakID
	SlowStart      time.Duration `yaml:"slow_start"`

	// Limits and timeouts of the client side.
	MaxConnections    int           `yaml:"max_connections"`
	HeaderTimeout     time.Duration `yaml:"header_timeout"`
	ClientTimeout     time.Duration `yaml:"client_timeout"`
	IdleTimeout       time.Duration `yaml:"idle_timeout"`
	ShutdownTimeout   time.Duration `yaml:"shutdown_timeout"`
	BufferRequestBody int           `yaml:"buffer_request_body"`
	// UpgradeIdleTimeout closes an upgraded (WebSocket) connection that carried no byte either
	// way for this long.
	UpgradeIdleTimeout time.Duration `yaml:"upgrade_idle_timeout"`
	// QueueTimeout is how long a request that finds every slot of its pool taken waits, in a
	// FIFO queue, for one to be released; 0 turns the queue off (503 at once).
	QueueTimeout time.Duration `yaml:"queue_timeout"`
	// MaxQueue bounds the waiting requests per pool and service; one more is answered 503.
	MaxQueue int `yaml:"max_queue"`
	// TrustedProxies are the client networks whose X-Forwarded-*, X-Real-IP and Forwarded
	// headers are kept (a bare address in the YAML is a one-address prefix).
	TrustedProxies []netip.Prefix `yaml:"trusted_proxies"`
}

// Service configures one service that backends may report in /pool.
type Service struct {
	WarningThreshold int    `yaml:"warning_threshold"`
	WarningScope     string `yaml:"warning_scope"` // ScopeVersion or ScopeService
}

// App maps client Host patterns to a service and a node pool.
type App struct {
	Name    string   `yaml:"name"`
	Hosts   []string `yaml:"hosts"`
	Service string   `yaml:"service"`
	Pool    string   `yaml:"pool"`
	Owner   string   `yaml:"owner"`
	// AllowFallbackToDefault is nil when the YAML does not set it; the default then
	// depends on how the pool is resolved (explicit pool: false, owner: true).
	AllowFallbackToDefault *bool `yaml:"allow_fallback_to_default"`
}

// Backend is one backend instance that pollbal polls and proxies to.
type Backend struct {
	ID       string `yaml:"id"`
	Address  string `yaml:"address"`
	Capacity int    `yaml:"capacity"`
	Pool     string `yaml:"pool"`
	Owner    string `yaml:"owner"`
}

// Alarms configures where pool_exhausted alarms go and how they are deduplicated.
type Alarms struct {
	Webhook     string        `yaml:"webhook"`
	DedupWindow time.Duration `yaml:"dedup_window"`
}

// Fleet describes the pollbal instances that share the same backends.
type Fleet struct {
	// Instances is how many pollbal instances send traffic to the same backends: a backend's
	// capacity is then its total for all of them, and an instance whose backend reports no
	// load sends it at most ceil(capacity / Instances) requests at once.
	Instances int `yaml:"instances"`
}

// TLS configures the TLS listener. It is off while Listen is empty.
type TLS struct {
	// Listen is the address of the TLS listener; "" disables it.
	Listen string `yaml:"listen"`
	// Certificates are the served certificates: SNI picks among them, the first is the default.
	Certificates []Certificate `yaml:"certificates"`
	// MinVersion is the lowest TLS version accepted: "1.2" or "1.3".
	MinVersion string `yaml:"min_version"`
}

// HTTP2 configures HTTP/2 to clients: offered by ALPN on the TLS listener, and with prior
// knowledge (h2c) on the plain listener. Every key needs a restart to change.
type HTTP2 struct {
	// Enabled offers h2 (then http/1.1) by ALPN on the TLS listener.
	Enabled bool `yaml:"enabled"`
	// H2C accepts HTTP/2 with prior knowledge on the plain listener.
	H2C bool `yaml:"h2c"`
	// MaxConcurrentStreams is the most streams a client connection may have open at once.
	MaxConcurrentStreams int `yaml:"max_concurrent_streams"`
	// MaxHeaderBytes bounds a request's header block: what it decodes to, and what it takes on
	// the wire (HEADERS and CONTINUATION frames together).
	MaxHeaderBytes int `yaml:"max_header_bytes"`
}

// Certificate is one certificate (with its chain) and its private key, both PEM files.
type Certificate struct {
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
}

// The words accepted by the keys that take one of a few; Validate rejects any other.
const (
	// Proxy.TieBreak: among candidates with equal spare capacity, rotate the starting point
	// on every request, or let the lowest backend id win.
	TieBreakRotate = "rotate"
	TieBreakID     = "id"

	// Service.WarningScope: each advertised version is its own group, or all versions of
	// the service count together.
	ScopeVersion = "version"
	ScopeService = "service"

	// TLS.MinVersion.
	TLSVersion12 = "1.2"
	TLSVersion13 = "1.3"
)

// Reserved node pool names.
const (
	PoolDefault    = "default"
	PoolUnassigned = "unassigned"
)
