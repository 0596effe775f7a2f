// Package store is where admin moves live (a move puts a backend in a node pool, whatever the
// configuration says): the state file, or etcd shared by a fleet with the state file as its
// cache. Every move is validated here, once (Validate), and applied here to the balancer
// through the Target port; admin only turns HTTP calls into Set and Clear and maps the errors
// to answers.
//
// File writes a move to the state file (temporary file, fsync, rename) before it applies it,
// so a move either survives a restart or does not happen; Load removes the temporary files
// that interrupted writes left behind. Etcd commits a move in a transaction and applies the
// moves of every instance sharing its prefix through a watch, re-reading everything after an
// outage or a compacted watch revision; while etcd cannot be reached it refuses moves
// (ErrUnavailable), keeps the last known ones, sets pollbal_store_up to 0 and raises the
// store_unavailable alarm.
package store
