// Package balancer holds pollbal's view of its backends and decides where a request goes:
// node-pool ownership, app resolution, the candidate predicate, ranking, capacity leases,
// fail-closed fallback and the pool_exhausted alarm.
//
// The request path reads one immutable Snapshot through an atomic pointer; the snapshot is
// rebuilt wholesale when the configuration or an admin override changes; a backend's health
// change swaps only the candidate sets of its own pool that it joins or leaves, each a copy of
// the old set with that one backend inserted or removed (regroup, snapshot.go), so a change
// costs its pool a copy of references and the rest of the fleet nothing.
// In-flight counters live in per-address slots (slot.go) that outlive snapshots and the
// configurations they were built from: a reload that changes a backend's capacity, renames it,
// or removes it and adds it back never loses or double-counts a lease. Ranking skips blocks of candidates whose spare
// hint (an upper bound that releases raise, hints.go) shows they cannot beat the best so far;
// the in-flight check-and-take, checked again against the limit current after it (a limit
// lowered since the ranking), stays the only gate on a lease. Each backend's limit — its
// capacity for a lone instance, this instance's share of it in a fleet, from fleet.instances
// and the backend's X-Pool-Load report (fleet.go, a pure decision) — is one atomic beside its
// health; limits stay within the capacities the hints were built with. Per-app metric handles
// (the pool counters, and the answered-request series the proxy records into, requests.go) are
// resolved once per app and kept on its App, so a request looks nothing up; an app that leaves
// the configuration has its series deleted for good. A lease reports how its forward ended
// (Answered, Full, Failed): a failed forward is counted per backend and reason, logged at warn
// at most once a second per backend, and, like a 502/503/504 under proxy.eject_on_5xx, counts
// towards eject_after when it says the backend cannot serve (failures.go). The package never imports poller, warning,
// proxy or admin (imports_test.go): check results arrive through Observe, the warning round
// reads the ready members through EachReady, and readers use the quiet State path.
package balancer
