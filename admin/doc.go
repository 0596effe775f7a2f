// Package admin serves everything on admin.listen: the HTML status page (GET /), the
// JSON state (GET /api/state), Prometheus metrics (GET /metrics), liveness and readiness
// (GET /healthz, GET /readyz), and the bearer-token admin API under /admin/ that moves backends
// between node pools and triggers reloads.
//
// Serve serves them within Limits: admin connections past a cap are closed as soon as they are
// accepted, and each connection is closed when it waits too long for a request head or between
// requests, so that connections to the admin port cannot take what client traffic needs.
//
// Admin is HTTP only: a move is handed to the store of moves (package store), which keeps it
// (state file or etcd) before it applies it; admin maps the store's errors to answers in one
// place (moveFailed) and writes the audit line. Reads go through the balancer's quiet path and
// never raise alarms.
package admin
