package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"

	"pollbal/admin"
	"pollbal/configs"
	"pollbal/internal/accesslog"
	"pollbal/internal/cmdline"
	"pollbal/internal/store"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "run" {
		keepSysmonAwake()
	}
	os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr))
}

func realMain(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usageProgram().Help(stderr)
		return 2
	}
	switch args[0] {
	case "version", "-version", "--version":
		return printVersion(args[1:], stdout, stderr)
	case "check":
		return check(args[1:], stdout, stderr)
	case "run":
		return run(args[1:], stdout, stderr)
	case "help":
		return help(args[1:], stdout, stderr)
	case "-h", "-help", "--help":
		usageProgram().Help(stdout)
		return 0
	default:
		fmt.Fprintf(stderr, "pollbal: unknown command %q\n\n", args[0])
		usageProgram().Help(stderr)
		return 2
	}
}

func check(args []string, stdout, stderr io.Writer) int {
	var o checkOptions
	if err := parseArgs(checkCommand(&o), args, stdout, stderr); err != nil {
		return cmdline.ExitCode(err)
	}
	if o.config == "" {
		fmt.Fprintln(stderr, "pollbal check: -config is required")
		return 2
	}
	cfg, err := configs.Load(o.config)
	if err != nil {
		for _, p := range configs.Problems(err) {
			fmt.Fprintln(stdout, p)
		}
		return 1
	}
	if unserved := configs.Unserved(cfg); len(unserved) > 0 {
		for _, p := range configs.Problems(configs.JoinProblems(unserved...)) {
			fmt.Fprintln(stdout, p)
		}
		return 1
	}
	if w := configs.AdminExposure(cfg); w != "" {
		fmt.Fprintln(stderr, "warning: "+w)
	}
	if o.skipFiles {
		fmt.Fprintln(stdout, "ok (the files it names were not read: -skip-files)")
		return 0
	}
	if problems := checkFiles(cfg); len(problems) > 0 {
		for _, p := range problems {
			fmt.Fprintln(stdout, p)
		}
		return 1
	}
	fmt.Fprintln(stdout, "ok")
	return 0
}

// checkFiles reads the files a valid configuration names, as `run` will, and returns every
// problem: a config that `run` would refuse must not pass `check` (the systemd unit runs
// check before start).
func checkFiles(cfg *configs.Config) []string {
	var problems []string
	if err := admin.CheckTokenFile(cfg.Admin.TokenFile); err != nil {
		problems = append(problems, "admin.token_file: "+err.Error())
	}
	if _, err := store.ReadState(cfg.Admin.StateFile); err != nil {
		problems = append(problems, "admin.state_file: "+err.Error())
	}
	if _, err := readSecret(cfg.Warning.SecretFile); err != nil {
		problems = append(problems, err.Error())
	}
	if cfg.TLS.Listen != "" {
		if _, _, err := loadCertificates(cfg); err != nil {
			problems = append(problems, configs.Problems(err)...)
		}
	}
	if e := cfg.Admin.Store.Etcd; e != nil {
		problems = append(problems, store.CheckEtcdFiles(e)...)
	}
	if err := checkAccessLog(cfg.AccessLog.Path); err != nil {
		problems = append(problems, "access_log.path: "+err.Error())
	}
	if cfg.StateDir != "" {
		if st, err := os.Stat(cfg.StateDir); err == nil && !st.IsDir() {
			problems = append(problems, "state_dir: "+cfg.StateDir+" is not a directory")
		} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
			problems = append(problems, "state_dir: "+err.Error())
		}
	}
	return problems
}

// checkAccessLog opens the access log's file as run does (creating it when it is missing) and
// closes it again; the log off or on standard output has nothing to check.
func checkAccessLog(path string) error {
	if path == configs.AccessLogOff || path == configs.AccessLogStdout {
		return nil
	}
	f, err := accesslog.OpenFile(path)
	if err != nil {
		return err
	}
	return f.Close()
}

func run(args []string, stdout, stderr io.Writer) int {
	var o runOptions
	if err := parseArgs(runCommand(&o), args, stdout, stderr); err != nil {
		return cmdline.ExitCode(err)
	}
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			fmt.Fprintf(stderr, "pollbal run: %v\n", err)
			return 2
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(stderr, "pollbal run: %v\n", err)
			return 2
		}
		defer pprof.StopCPUProfile()
	}
	if o.config == "" {
		fmt.Fprintln(stderr, "pollbal run: -config is required")
		return 2
	}
	log, err := newLogger(stderr, o.logFormat, o.logLevel)
	if err != nil {
		fmt.Fprintf(stderr, "pollbal run: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	defer signal.Stop(usr1)
	// A closed standard output (access_log.path "-" into a pipe whose reader went away) must
	// fail the write, which the access log counts, not end the process as SIGPIPE would.
	signal.Ignore(syscall.SIGPIPE)
	usr2 := make(chan os.Signal, 1) // binary upgrade
	signal.Notify(usr2, syscall.SIGUSR2)
	defer signal.Stop(usr2)

	srv, err := newServer(o.config, log)
	if err != nil {
		for _, p := range configs.Problems(err) {
			log.Error("cannot start", "problem", p)
		}
		return 1
	}
	if err := srv.run(ctx, hup, usr1, usr2); err != nil && !errors.Is(err, context.Canceled) {
		log.Error("stopped with an error", "err", err)
		return 1
	}
	return 0
}

func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("bad -log-level %q", level)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	default:
		return nil, fmt.Errorf("bad -log-format %q (text or json)", format)
	}
}
