// Package cmdline is the command-line handling that the project's commands share: a flag set
// that explains itself on the command's stderr, the check that no argument follows the flags,
// one error for a command line that cannot run, and the exit codes. A program with
// subcommands (pollbal) defines them once as a Program, from which its usage, each command's
// -h and its man page are rendered.
package cmdline
