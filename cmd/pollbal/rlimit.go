package main

import (
	"log/slog"
	"syscall"

	"pollbal/configs"
)

// filesNeeded is the descriptor budget a configuration needs: every client connection, every
// admin connection, a connection and a check to every backend, and room for listeners, files
// and the runtime.
func filesNeeded(cfg *configs.Config) uint64 {
	return uint64(cfg.Proxy.MaxConnections) + uint64(cfg.Admin.MaxConnections) + 2*uint64(len(cfg.Backends)) + 64
}

// raiseFileLimit raises the soft RLIMIT_NOFILE to the hard limit (the Go runtime does so too
// at start; this keeps it explicit and reports a failure), and warns when the limit is still
// below need: past it, pollbal keeps serving but waits for descriptors to accept.
func raiseFileLimit(log *slog.Logger, need uint64) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		log.Warn("cannot read the open file limit", "error", err)
		return
	}
	if lim.Cur < lim.Max {
		raised := syscall.Rlimit{Cur: lim.Max, Max: lim.Max}
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised); err != nil {
			log.Warn("cannot raise the open file limit to its hard limit", "soft", lim.Cur, "hard", lim.Max, "error", err)
		} else {
			lim = raised
		}
	}
	if lim.Cur < need {
		log.Warn("open file limit below what proxy.max_connections and admin.max_connections need; raise it (LimitNOFILE= in the systemd unit, ulimit -n) or lower them",
			"limit", lim.Cur, "need", need)
	}
}
