// Package metrictest reads series' values, for tests: from a Gatherer (a component's registry)
// or from the text a /metrics endpoint serves (the end-to-end tests), one at a time or a table
// of them (ExpectText). A series is named as /metrics spells it, `name{label="value",...}`, and
// matched with exactly those labels.
//
// It is imported only by _test.go files.
package metrictest
