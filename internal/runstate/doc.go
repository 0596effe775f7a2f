// Package runstate keeps what a pollbal process knows at run time across a restart or a
// binary upgrade: per backend address its readiness, last reports, last load report, ejection
// and slow start, and whether it is warned. It owns the file (state_dir/runtime.json, see
// File), writes it atomically (Writer: at most once a second at the end of a check round, and
// when asked, on shutdown and right before an upgrade hands over), reads it back, and decides
// whether a file read at start may be restored (Decide, a pure function).
//
// It knows nothing of the balancer, the poller or the warning tracker: cmd/pollbal captures
// their state into a File and applies a Decision to them.
//
// # The file
//
// One JSON object: {"version":1,"site":...,"written":RFC 3339,"pid":n,"pollbal":version,
// "backends":[{"address":..., "id":..., "ready":..., "reason":..., "reports":[...],
// "ignored_services":[...], "checked":..., "ready_since":..., "load":{...}, "ejected":...,
// "fail_streak":n, "warned":...}]}. A file with another version is never restored (a newer
// pollbal's format, read by an older one after a downgrade, is ignored with a log line), so a
// change of format takes a new version. Entries are keyed by address: the reports are what
// the process at that address answered, whatever id the configuration gives it now.
package runstate
