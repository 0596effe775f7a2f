// Package admin serves everything on admin.listen: the HTML status page (GET /), the
// JSON state (GET /api/state), Prometheus metrics (GET /metrics), liveness and readiness
// (GET /healthz, GET /readyz), and the bearer-token admin API under /admin/ that moves backends
// between node pools and triggers reloads.
//
// Admin overrides are persisted to the state file before they are applied (LoadState and
// SaveState), so a move either survives a restart or does not happen at all; the temporary files
// of writes a crash interrupted are removed at start (RemoveStaleTemps). Reads go through
// the balancer's quiet path and never raise alarms.
package admin
