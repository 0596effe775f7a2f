// Package configs is pollbal's configuration: the YAML schema (pollbal.yaml), strict loading with
// defaults, validation that reports every problem with its path, the pure pool-resolution
// helpers that read a Backend or an App, and the YAML files shipped beside the code.
//
// Loading is three steps, each in its own file: raw.go decodes the YAML strictly (unknown keys
// are errors) into a mirror of the schema, generated from Config's declaration, that remembers
// which keys were written and converts them by walking both together, defaults.go
// fills what was left out (an explicit zero is kept, so that Validate rejects it instead of
// silently replacing it), and validate.go checks the result. reload.go holds what a reload
// decides before applying a file: the settled read (ReadSettled), the reload guard (Guard, pure)
// and the reasons a reload is rejected for. Nothing here does I/O except Load and ReadSettled,
// and nothing keeps state between calls.
package configs
