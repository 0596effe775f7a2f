package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"pollbal/admin"
	"pollbal/configs"
	"pollbal/internal/accesslog"
	"pollbal/internal/certs"
	"pollbal/internal/metric"
)

func newReloadRejected(reg prometheus.Registerer) *prometheus.CounterVec {
	c := metric.Counters("pollbal_config_reloads_rejected_total",
		"Reloads (SIGHUP or POST /admin/reload) rejected, by reason: config_invalid, restart_required, config_changing, reload_guard.",
		"reason")
	reg.MustRegister(c)
	for _, r := range configs.RejectReasons {
		c.WithLabelValues(r)
	}
	return c
}

// errStopping is a reload that was ready to apply after shutdown began: nothing was applied.
var errStopping = errors.New("reload abandoned: shutting down")

// reload re-reads the configuration (SIGHUP, POST /admin/reload). It reads the file until two
// reads a gap apart are identical, so a file being written is never half-applied; a valid
// configuration then passes the reload guard (no app, no backend, or fewer than half of the
// running backends kept is rejected unless force) and is applied whole. Any rejection leaves
// the running configuration as it is, sets the gauge to 0, counts its reason and is logged; the
// error it returns carries the reason (configs.ReasonOf). Reloads take turns; one whose ctx
// ends while it waits for its turn or reads files, or that finds shutdown begun, is abandoned
// and changes nothing.
func (s *server) reload(ctx context.Context, force bool) error {
	select {
	case s.reloading <- struct{}{}:
		defer func() { <-s.reloading }()
	case <-ctx.Done():
		s.log.Info("reload abandoned while waiting for the one in progress", "err", ctx.Err())
		return ctx.Err()
	}
	next, err := s.prepareReload(ctx, force)
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		// Shutting down (SIGHUP) or the caller went away (POST) while the file was being read:
		// nothing was decided about the file.
		s.log.Info("reload abandoned", "err", err)
		return err
	}
	if err == nil {
		err = s.apply(next)
	}
	if errors.Is(err, errStopping) {
		s.log.Info("reload abandoned: shutting down; nothing of it was applied")
		return err
	}
	if err != nil {
		reason := configs.ReasonOf(err)
		s.reloadOK.Set(0)
		s.reloadRejected.WithLabelValues(reason).Inc()
		for _, p := range configs.Problems(err) {
			s.log.Error("reload rejected; keeping the running configuration", "reason", reason, "forced", force, "problem", p)
		}
		s.events.Add("reload", fmt.Sprintf("reload rejected (%s): %v", reason, err))
		return err
	}
	s.reloadOK.Set(1)
	msg := "configuration reloaded"
	if force {
		msg = "configuration reloaded (forced)"
	}
	s.events.Add("reload", msg)
	s.log.Info(msg, "backends", len(next.cfg.Backends), "apps", len(next.cfg.Apps), "forced", force)
	return nil
}

// stopApplying makes every later reload apply nothing; it waits for one being applied.
func (s *server) stopApplying() {
	s.applyMu.Lock()
	s.stopped = true
	s.applyMu.Unlock()
}

// nextConfig is a reload read and checked, ready to apply.
type nextConfig struct {
	cfg       *configs.Config
	secret    []byte
	certs     *newCerts // nil without tls.listen
	admin     *admin.Change
	accessLog *accesslog.Change // its new file open: discarded when the reload is not applied
}

// newCerts is what a reload gives the TLS listener.
type newCerts struct {
	set        *certs.Set
	minVersion uint16
}

// apply applies a prepared reload whole, unless shutdown has begun (errStopping). It does no
// reading: only a new admin.state_file is written (the running moves), first, and when that
// fails nothing is applied. The access log's new file was opened when the reload was prepared,
// so switching to it cannot fail while the log is open (it is closed only once shutdown has
// stopped every apply).
func (s *server) apply(next *nextConfig) error {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	if s.stopped {
		next.accessLog.Discard()
		return errStopping
	}
	if err := s.moves.SetStateFile(next.cfg.Admin.StateFile); err != nil {
		next.accessLog.Discard()
		return err
	}
	s.admin.Apply(next.admin)
	if err := s.alog.Apply(next.accessLog); err != nil {
		s.log.Error("access log: the reload's access_log section could not be applied; the log goes on as before", "err", err)
	}
	s.warn.Update(next.cfg, next.secret) // first: a round in between never warns a backend being removed
	s.alarms.Update(next.cfg)
	s.bal.Update(next.cfg)
	s.poll.Update(next.cfg.Poll, targets(next.cfg))
	if next.certs != nil {
		s.certs.Swap(next.certs.set, next.certs.minVersion)
	}
	s.warnAbout(s.cfg, next.cfg)
	s.cfg = next.cfg
	return nil
}

// prepareReload reads, validates and checks the new configuration and the files it names
// (certificates included: one that cannot be read, does not match its key or has expired
// rejects the reload as config_invalid; so does an access_log.path that cannot be opened); it
// changes nothing, but opens a changed access log's file.
func (s *server) prepareReload(ctx context.Context, force bool) (*nextConfig, error) {
	data, err := configs.ReadSettled(ctx, s.path, configs.SettleGap, configs.SettleLimit)
	if err != nil {
		return nil, err
	}
	cfg, err := configs.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("load config %s: %w", s.path, err)
	}
	if err := s.checkStatic(cfg); err != nil {
		return nil, configs.Reject(configs.ReasonRestartRequired, err)
	}
	if err := configs.Guard(cfg, s.runningAddresses()); err != nil {
		if !force {
			return nil, err
		}
		s.log.Warn("forced reload: applying a configuration the reload guard would reject", "guard", err.Error())
	}
	next := &nextConfig{cfg: cfg}
	if next.secret, err = readSecret(cfg.Warning.SecretFile); err != nil {
		return nil, err
	}
	if cfg.TLS.Listen != "" {
		set, minVersion, err := loadCertificates(cfg)
		if err != nil {
			return nil, configs.Reject(configs.ReasonInvalid, err)
		}
		next.certs = &newCerts{set: set, minVersion: minVersion}
	}
	if next.admin, err = s.admin.Prepare(cfg.Admin.TokenFile, adminLimits(cfg)); err != nil {
		return nil, err
	}
	// Last, since it opens a file that every later rejection would have to close.
	if next.accessLog, err = s.alog.Prepare(cfg.AccessLog); err != nil {
		return nil, configs.Reject(configs.ReasonInvalid, fmt.Errorf("access_log.path: %w", err))
	}
	return next, nil
}

// runningAddresses lists the addresses of the backends that are ready now.
func (s *server) runningAddresses() []string {
	var out []string
	for _, b := range s.bal.Snapshot().Backends() {
		if b.Health().Ready {
			out = append(out, b.Address)
		}
	}
	return out
}
