package configs

import "time"

// Defaults for keys that the YAML leaves out (pollbal.yaml shows each one).
const (
	defaultListen         = "127.0.0.1:8080"
	defaultAdminListen    = "127.0.0.1:9090"
	defaultAdminMaxConns  = 256
	defaultPollInterval   = time.Second
	defaultPollTimeout    = 800 * time.Millisecond
	defaultPollFall       = 1
	defaultPollRise       = 1
	defaultPollMaxBackoff = 5 * time.Second
	defaultPollMaxBody    = 4096
	defaultRestoreMaxAge  = 30 * time.Second
	defaultWarningTimeout = 500 * time.Millisecond
	defaultBackendTimeout = 30 * time.Second
	defaultMaxRequestBody = 10 << 20
	defaultRetries        = 1
	defaultEjectAfter     = 3
	defaultTieBreak       = TieBreakRotate
	defaultMaxConnections = 10000
	defaultHeaderTimeout  = 10 * time.Second
	defaultClientTimeout  = 60 * time.Second
	defaultIdleTimeout    = 60 * time.Second
	defaultShutdown       = 30 * time.Second
	defaultUpgradeIdle    = time.Hour
	defaultMaxQueue       = 1000
	defaultBufferBody     = 64 << 10
	defaultDedupWindow    = 5 * time.Minute
	defaultWarningScope   = ScopeVersion
	defaultFleetInstances = 1
	defaultTLSMinVersion  = TLSVersion12

	defaultHTTP2Streams     = 250
	defaultHTTP2HeaderBytes = 64 << 10

	defaultAccessLogFormat = FormatJSON
	defaultAccessLogSample = 1.0
	defaultAccessLogBuffer = 256 << 10

	defaultEtcdDialTimeout = 2 * time.Second
	// DefaultEtcdPrefix is admin.store.etcd.prefix when the YAML does not set one.
	DefaultEtcdPrefix = "/pollbal/"

	// DefaultCapacity is a backend's capacity when the YAML does not set one.
	DefaultCapacity = 100

	// MaxRetries is the largest proxy.retries: every backend a request tries is remembered so
	// that no retry goes back to it, in a fixed-size set that takes no allocation (the proxy
	// checks at compile time that this many retries fit).
	MaxRetries = 7
)

// Default returns a Config holding every top-level default and nothing else: no
// site, services, apps or backends, so it does not validate until those are added. Each call
// returns a new value that the caller owns.
func Default() *Config {
	return &Config{
		Listen: defaultListen,
		Admin:  Admin{Listen: defaultAdminListen, MaxConnections: defaultAdminMaxConns},
		Poll: Poll{
			Interval:   defaultPollInterval,
			Timeout:    defaultPollTimeout,
			Fall:       defaultPollFall,
			Rise:       defaultPollRise,
			MaxBackoff: defaultPollMaxBackoff,
			MaxBody:    defaultPollMaxBody,

			RestoreMaxAge: defaultRestoreMaxAge,
		},
		Warning: Warning{Timeout: defaultWarningTimeout},
		Proxy: Proxy{
			BackendTimeout: defaultBackendTimeout,
			MaxRequestBody: defaultMaxRequestBody,
			Retries:        defaultRetries,
			EjectAfter:     defaultEjectAfter,
			TieBreak:       defaultTieBreak,

			MaxConnections:    defaultMaxConnections,
			HeaderTimeout:     defaultHeaderTimeout,
			ClientTimeout:     defaultClientTimeout,
			IdleTimeout:       defaultIdleTimeout,
			ShutdownTimeout:   defaultShutdown,
			BufferRequestBody: defaultBufferBody,

			UpgradeIdleTimeout: defaultUpgradeIdle,
			MaxQueue:           defaultMaxQueue,
		},
		Alarms: Alarms{DedupWindow: defaultDedupWindow},
		Fleet:  Fleet{Instances: defaultFleetInstances},
		TLS:    TLS{MinVersion: defaultTLSMinVersion},
		HTTP2: HTTP2{
			Enabled:              true,
			MaxConcurrentStreams: defaultHTTP2Streams,
			MaxHeaderBytes:       defaultHTTP2HeaderBytes,
		},
		AccessLog: AccessLog{
			Format: defaultAccessLogFormat,
			Sample: defaultAccessLogSample,
			Buffer: defaultAccessLogBuffer,
		},
	}
}

// setElementDefaults sets the defaults of a list element, map value or optional mapping that
// the YAML writes (e points to its zero value): a backend's capacity, a service's warning
// scope, the etcd store's prefix and dial timeout.
func setElementDefaults(e any) {
	switch e := e.(type) {
	case *Backend:
		e.Capacity = DefaultCapacity
	case *Service:
		e.WarningScope = defaultWarningScope
	case *Etcd:
		e.Prefix = DefaultEtcdPrefix
		e.DialTimeout = defaultEtcdDialTimeout
	}
}
