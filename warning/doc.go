// Package warning implements pollbal's rolling-update protection: Decide, a pure
// function from the ready backends' reports to the groups and the backends that must not go
// down now, and Sender, which POSTs /pool_warning to those backends (docs/protocol.md) in the
// background, bounded by a timeout, without ever delaying its caller.
package warning
