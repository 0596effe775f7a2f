package main

import (
	"context"

	"pollbal/internal/handover"
)

// upgrade is SIGUSR2 and POST /admin/upgrade: it starts the binary at the path this process
// was started by, hands it the listening sockets, and returns its pid once it is ready; run
// then drains this process and exits. Right before, it writes the runtime state for the new
// process to restore, and holds every later write: once the new process took over, its state
// is the newer one; if it failed, writes resume. When it fails, this process keeps serving
// (handover.Upgrade logs why and counts it in pollbal_upgrades_total).
//
// One at a time (handover.ErrUpgradeInProgress). It runs under run's context, not its
// caller's: an admin client that goes away does not cancel it, SIGTERM does.
func (s *server) upgrade(context.Context) (int, error) {
	if !s.upgrading.CompareAndSwap(false, true) {
		return 0, handover.ErrUpgradeInProgress
	}
	defer s.upgrading.Store(false)
	release := func(bool) {}
	if s.state != nil {
		var err error
		if release, err = s.state.HandOver(); err != nil {
			s.log.Warn("upgrade: the new process starts without this process's runtime state", "err", err)
		}
	}
	pid, err := s.hand.Upgrade(s.runCtx)
	release(err == nil)
	if err == nil {
		s.handedOver <- pid // buffered: one hand-over per process (handover.ErrHandedOver after it)
	}
	return pid, err
}
