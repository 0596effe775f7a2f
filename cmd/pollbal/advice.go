package main

import (
	"slices"

	"pollbal/configs"
)

// configWarnings lists what `run` says at warn level about a valid configuration: that it
// serves nothing (no app, no backend), and that its admin listener is open to other hosts.
func configWarnings(cfg *configs.Config) []string {
	warnings := configs.Problems(configs.JoinProblems(configs.Unserved(cfg)...))
	if w := configs.AdminExposure(cfg); w != "" {
		warnings = append(warnings, w)
	}
	return warnings
}

// warnAbout logs each warning about cfg that prev did not have: every one at start (prev
// nil), and on a reload only what the reload changed, so that a warning is not repeated on
// every SIGHUP.
func (s *server) warnAbout(prev, cfg *configs.Config) {
	var before []string
	if prev != nil {
		before = configWarnings(prev)
	}
	for _, w := range configWarnings(cfg) {
		if !slices.Contains(before, w) {
			s.log.Warn(w)
		}
	}
}
