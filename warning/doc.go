// Package warning implements pollbal's rolling-update protection: Decide, a pure function from
// the ready backends' reports to the groups and the backends that must not go down now; Sender,
// which POSTs /pool_warning to those backends (docs/protocol.md) in the background, bounded by a
// timeout, without ever delaying its caller; and Tracker, the one owner of the warning round,
// which after each check round reads the ready members through the narrow Members view (the
// balancer satisfies it without importing this package), decides, keeps the groups and warned
// flags that the state API and the metrics show, and hands the POSTs to its Sender. A backend
// that a reload removes is forgotten: its flag, its delivery state, its error series.
package warning
