// Package alarms is what pollbal tells people about: the alarms it raises (pool_exhausted when
// an app's pool has no available candidate, store_unavailable when the shared store of moves
// cannot be reached), the pool_fallback notes, and the ring of recent events that the status
// page lists.
//
// A Notifier subscribes to what the other packages report through ports they declare
// themselves: the balancer's Observer (a request found its pool exhausted, or was served from
// default), the store's Alarms (etcd cannot be reached). It deduplicates each alarm by its key
// within alarms.dedup_window, logs it, lists it in the Events ring and POSTs its JSON body to
// alarms.webhook in the background (webhook.go: a few tries with exponential backoff, a bounded
// number in flight), so that raising an alarm never delays a request. Nothing here imports the
// balancer, the store or the proxy: they do not know who listens.
//
// Events is the ring itself; the balancer (ready, not_ready, ejected, readmitted, admin_move,
// restored),
// the warning tracker (warning_started, warning_stopped), the store and the reload path add to
// it through their own one-method Events ports, and admin reads it for /api/state and the page.
package alarms
