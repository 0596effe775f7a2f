package configs

// Where a backend's node pool comes from (pool_source in GET /api/state). PoolSourceAdmin is decided
// outside this package, by the admin overrides; it is named here so every package spells it
// the same way.
const (
	PoolSourceAdmin   = "admin"
	PoolSourceConfig  = "config"
	PoolSourceOwner   = "owner"
	PoolSourceDefault = "default"
)

// How an app's pool is resolved (resolution in GET /api/state).
const (
	ResolutionExplicit = "explicit"
	ResolutionOwner    = "owner"
	ResolutionDefault  = "default"
)

// OwnerPool is the node pool of an owner: pool-<owner>.
func OwnerPool(owner string) string { return "pool-" + owner }

// BackendPool returns a backend's node pool as the configuration decides it, without admin
// overrides: its pool, else pool-<owner>, else default; source says which.
func BackendPool(b Backend) (pool, source string) {
	switch {
	case b.Pool != "":
		return b.Pool, PoolSourceConfig
	case b.Owner != "":
		return OwnerPool(b.Owner), PoolSourceOwner
	}
	return PoolDefault, PoolSourceDefault
}

// AppPool resolves an app's node pool: its explicit pool (fallback to default off
// unless allowed), else pool-<owner> (fallback on unless forbidden), else default. An app
// whose pool is default never falls back: there is nothing further to fall back to, whatever
// AllowFallbackToDefault says.
func AppPool(a App) (pool, resolution string, allowFallback bool) {
	switch {
	case a.Pool != "":
		pool, resolution, allowFallback = a.Pool, ResolutionExplicit, false
	case a.Owner != "":
		pool, resolution, allowFallback = OwnerPool(a.Owner), ResolutionOwner, true
	default:
		return PoolDefault, ResolutionDefault, false
	}
	if a.AllowFallbackToDefault != nil {
		allowFallback = *a.AllowFallbackToDefault
	}
	if pool == PoolDefault {
		allowFallback = false
	}
	return pool, resolution, allowFallback
}
