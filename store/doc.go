// Package store keeps the fleet's admin moves in etcd: it writes a move in a transaction and
// follows the moves of every instance that shares the prefix through a watch, re-reading
// everything after an outage or a compacted watch revision.
package store
