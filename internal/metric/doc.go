// Package metric declares and registers a component's Prometheus metrics the same way in every
// package: a counter vector in one call, and one registration of a component's collectors that
// goes on past a failure and tells every one.
package metric
