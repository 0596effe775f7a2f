// Package balancer is pollbal's scheduler and nothing else: it holds pollbal's view of its
// backends and decides where a request goes: node-pool ownership, app resolution, the candidate
// predicate, ranking, capacity leases, the queue, fleet limits and fail-closed fallback.
//
// What flows in and out goes through declared ports (ports.go): check results arrive through
// Observe (the poller's sink), and the sink asks ConfirmAfter; what a forward learned arrives
// through Report, one typed Result (answered, refused as full, failed, timed out, exhausted),
// the only way the proxy changes a failure streak, an ejection or a limit, and the one place
// pool_exhausted is counted and raised; exhausted pools and fallbacks go out to an Observer
// (the alarms) and the changes the status page lists to Events. The warning round reads the
// ready members through EachReady; readers use the quiet read path (read.go), which takes no
// lease and raises nothing. What a previous process knew arrives once, before the first check,
// through Restore (runtime.go): it writes the backends' cells and publishes a new snapshot. The package never imports poller, warning, alarms, proxy or admin
// (imports_test.go).
//
// Snapshots. The request path reads one immutable Snapshot through an atomic pointer; it is
// rebuilt wholesale when the configuration or an admin override changes. Invariant: once
// published, no field of a Snapshot, nor of its members, apps and candidate lists, is written,
// and a Snapshot holds no pointer back to the Balancer (immutable_test.go). What changes under
// it lives in cells it references and does not own, each safe for concurrent use:
//   - per address, a slot (slot.go): the in-flight count and the block hints its releases
//     raise, outliving snapshots and the configurations they were built from, so a reload that
//     changes a backend's capacity, renames it, or removes it and adds it back never loses or
//     double-counts a lease;
//   - per backend, its runtime state (Backend): health, limit, load report, failure streak and
//     ejection;
//   - per candidate list, its cell (candCell): the current candidate set and the hints. A
//     backend's health change swaps, in the cells of its own pool's lists only, the set it
//     joins or leaves for a copy of the old one with that backend inserted or removed (regroup,
//     snapshot.go): its pool pays a copy of references, the rest of the fleet nothing, and no
//     new snapshot is built;
//   - per (pool, service), the rotation of the tie-break.
//
// Taking a lease (Acquire) moves only those cells and counts a fallback; it raises nothing.
// Ranking skips blocks of candidates whose spare hint (an upper bound that releases raise,
// hints.go) shows they cannot beat the best so far; the in-flight check-and-take, checked again
// against the limit current after it (a limit lowered since the ranking), stays the only gate
// on a lease. Each backend's limit — its capacity for a lone instance, this instance's share of
// it in a fleet, from fleet.instances and the backend's X-Pool-Load report (fleet.go, a pure
// decision) — is one atomic beside its health; limits stay within the capacities the hints
// were built with. The queue (queue.go) is a component the proxy calls through Wait; a lease it
// hands over is taken from the snapshot current when the slot frees, which may be newer than
// the request's.
//
// The pool counters of each app are resolved once per app and kept on its App, so a request
// looks nothing up; an app that leaves the configuration has its series deleted. A failed
// forward is counted per backend and reason, logged at warn at most once a second per backend,
// and, like a 502/503/504 under proxy.eject_on_5xx, counts towards eject_after when it says the
// backend cannot serve (failures.go, report.go).
package balancer
