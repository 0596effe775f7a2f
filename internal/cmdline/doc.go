// Package cmdline is the command-line handling that the project's small commands (the example
// backend, the demo) share: a flag set that explains itself on the command's stderr, the check
// that no argument follows the flags, one error for a command line that cannot run, and the
// exit codes.
package cmdline
