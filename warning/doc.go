// Package warning implements pollbal's rolling-update protection (SPEC §5): Decide, a pure
// function from the ready backends' reports to the groups and the backends that must not go
// down now, and Sender, which POSTs /pool_warning to those backends (SPEC §2) in the
// background, bounded by a timeout, without ever delaying its caller.
package warning
