package main

import (
	"flag"

	"pollbal/internal/cmdline"
)

// The command line is defined here only: `pollbal -h`, `pollbal COMMAND -h` and the man page
// (`pollbal help -man`, shipped as pollbal.1) are rendered from these definitions.

// runOptions are the flags of `pollbal run`.
type runOptions struct {
	config, logFormat, logLevel, cpuProfile string
}

func (o *runOptions) define(fs *flag.FlagSet) {
	fs.StringVar(&o.config, "config", "", "the configuration `FILE` (required)")
	fs.StringVar(&o.logFormat, "log-format", "text", "log `format`: text or json")
	fs.StringVar(&o.logLevel, "log-level", "info", "log `level`: debug, info, warn or error")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to `FILE` (benchmarking)")
}

// checkOptions are the flags of `pollbal check`.
type checkOptions struct {
	config    string
	skipFiles bool
}

func (o *checkOptions) define(fs *flag.FlagSet) {
	fs.StringVar(&o.config, "config", "", "the configuration `FILE` (required)")
	fs.BoolVar(&o.skipFiles, "skip-files", false, "do not read the files the configuration names (admin.token_file, admin.state_file,\n"+
		"warning.secret_file, the tls.certificates, the admin.store.etcd files) nor open access_log.path: for checking a\n"+
		"configuration away from the host it is written for; pollbal run always reads and opens them")
}

// helpOptions are the flags of `pollbal help`.
type helpOptions struct {
	man bool
}

func (o *helpOptions) define(fs *flag.FlagSet) {
	fs.BoolVar(&o.man, "man", false, "print this manual as a man page (roff), as shipped in pollbal.1")
}

func runCommand(o *runOptions) *cmdline.Command {
	return &cmdline.Command{
		Name:    "run",
		Args:    "-config FILE [-log-format text|json] [-log-level debug|info|warn|error] [-cpuprofile FILE]",
		Summary: "serve: poll the backends, route client traffic, serve the admin listener",
		Description: `Runs pollbal on the configuration FILE until SIGINT or SIGTERM; then it stops accepting,
lets the requests in flight finish (up to proxy.shutdown_timeout) and exits 0. SIGHUP re-reads
the configuration (see SIGNALS). A configuration that is invalid, or names a file that cannot be
used, stops it at once with exit status 1 and every problem in the log.`,
		Flags: o.define,
	}
}

func checkCommand(o *checkOptions) *cmdline.Command {
	return &cmdline.Command{
		Name:    "check",
		Args:    "-config FILE [-skip-files]",
		Summary: "check a configuration file and the files it names",
		Description: `Prints every problem of the configuration FILE, one per line with its path and line, and
exits 1; or prints ok and exits 0. It reads the files the configuration names, as run will, and
fails on a configuration that cannot serve a request (no app or no backend). Warnings, such as an
admin listener open to other hosts without a token, go to stderr.`,
		Flags: o.define,
	}
}

func versionCommand() *cmdline.Command {
	return &cmdline.Command{
		Name:        "version",
		Summary:     "print the version, the commit and the Go version it was built with",
		Description: `Prints one line: pollbal VERSION (commit COMMIT, GO VERSION).`,
	}
}

func helpCommand(o *helpOptions) *cmdline.Command {
	return &cmdline.Command{
		Name:    "help",
		Args:    "[-man] [COMMAND]",
		Summary: "print this usage, a command's help, or the manual",
		Description: `Without a COMMAND, prints the usage of every command (as pollbal -h does); with one, that
command's help (as pollbal COMMAND -h does).`,
		Flags:    o.define,
		Operands: "[COMMAND]",
	}
}

// program returns pollbal's command line; the options it binds are those given, so that a
// command can parse into them (help and the man page pass throwaway ones).
func program(run *runOptions, check *checkOptions, help *helpOptions) *cmdline.Program {
	return &cmdline.Program{
		Name:    "pollbal",
		Summary: "pull-style health-check HTTP load balancer",
		Description: `pollbal polls every backend's GET /pool once per interval and routes client traffic only to
the ready members of the request's node pool, ranked by spare capacity, never sending a backend
more requests at once than its capacity. During rolling updates it keeps warning_threshold
backends of each pool and version serving by POSTing /pool_warning to the ones that must not go
down now.

The configuration is one YAML file. pollbal.yaml, shipped with pollbal, is the commented
reference of every key; unknown keys are errors. The admin listener (admin.listen) serves the
status page, /api/state, /metrics, /healthz, /readyz and the admin API, which needs the bearer
token of admin.token_file. Keep it on a loopback address: everything but /admin/* is served
without authentication.`,
		Commands: []*cmdline.Command{runCommand(run), checkCommand(check), versionCommand(), helpCommand(help)},
		Sections: []cmdline.Section{
			{Title: "Signals", Text: `
  SIGHUP  re-read the configuration (as POST /admin/reload does): a valid one is applied whole without dropping a request; an invalid one, or one the reload guard rejects (no app, no backend, fewer than half of the running backends), is rejected whole and the running configuration stays.
  SIGINT, SIGTERM  stop accepting, let the requests in flight finish, exit 0.
  SIGUSR1  reopen the access log file (after logrotate moved it).
  SIGUSR2  upgrade: start the binary at the same path with the same arguments, hand it the listening sockets, and exit once it is ready.`},
			{Title: "Exit status", Text: `
  0  run stopped on a signal; check found no problem.
  1  run could not start or stopped on an error; check found problems.
  2  the command line is wrong (an unknown command or flag, a missing -config, an argument left over).`},
			{Title: "Files", Text: `
  /etc/pollbal/pollbal.yaml  the configuration the systemd unit runs with.
  /var/lib/pollbal  the unit's state directory (admin.state_file, state_dir).
  pollbal.service, pollbal.socket, pollbal-admin.socket  the systemd units; the sockets hold the listeners across restarts.`},
			{Title: "See also", Text: `systemctl(1), systemd.socket(5), and README.md in pollbal's documentation directory
(/usr/local/share/doc/pollbal with make install's defaults).`},
		},
	}
}

// usageProgram is the command line for help and the man page, bound to nothing.
func usageProgram() *cmdline.Program {
	return program(new(runOptions), new(checkOptions), new(helpOptions))
}
