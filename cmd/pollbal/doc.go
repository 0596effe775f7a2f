// Command pollbal is the pollbal load balancer: `pollbal run -config FILE` runs it,
// `pollbal check -config FILE` validates a configuration, `pollbal version` prints the version.
// This package only wires the components together and handles signals.
package main
