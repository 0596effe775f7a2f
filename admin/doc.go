// Package admin serves everything on admin.listen: the HTML status page (GET /), the
// JSON state (GET /api/state), Prometheus metrics (GET /metrics), liveness and readiness
// (GET /healthz, GET /readyz), and the bearer-token admin API under /admin/ that moves backends
// between node pools and triggers reloads.
//
// Serve serves them within Limits: admin connections past a cap are closed as soon as they are
// accepted, and each connection is closed when it waits too long for a request head or between
// requests, so that connections to the admin port cannot take what client traffic needs.
//
// Admin overrides are persisted to the state file before they are applied (LoadState and
// SaveState), so a move either survives a restart or does not happen at all; the temporary files
// of writes a crash interrupted are removed at start (RemoveStaleTemps). Reads go through
// the balancer's quiet path and never raise alarms.
package admin
