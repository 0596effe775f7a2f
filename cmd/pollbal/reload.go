package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"pollbal/certs"
	"pollbal/configs"
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

// reload re-reads the configuration (SIGHUP, POST /admin/reload). It reads the file until two
// reads a gap apart are identical, so a file being written is never half-applied; a valid
// configuration then passes the reload guard (no app, no backend, or fewer than half of the
// running backends kept is rejected unless force) and is applied whole. Any rejection leaves
// the running configuration as it is, sets the gauge to 0, counts its reason and is logged; the
// error it returns carries the reason (configs.ReasonOf).
func (s *server) reload(ctx context.Context, force bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cfg, secret, tlsCerts, err := s.prepareReload(ctx, force)
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		// Shutting down (SIGHUP) or the caller went away (POST) while the file was being read:
		// nothing was decided about the file.
		s.log.Info("reload abandoned", "err", err)
		return err
	}
	if err != nil {
		reason := configs.ReasonOf(err)
		s.reloadOK.Set(0)
		s.reloadRejected.WithLabelValues(reason).Inc()
		for _, p := range configs.Problems(err) {
			s.log.Error("reload rejected; keeping the running configuration", "reason", reason, "forced", force, "problem", p)
		}
		s.bal.Events().Add("reload", fmt.Sprintf("reload rejected (%s): %v", reason, err))
		return err
	}
	s.warn.Update(cfg, secret) // first: a round in between never warns a backend being removed
	s.bal.Update(cfg)
	s.poll.Update(cfg.Poll, targets(cfg))
	if tlsCerts != nil {
		s.certs.Swap(tlsCerts.set, tlsCerts.minVersion)
	}
	s.cfg = cfg
	s.reloadOK.Set(1)
	msg := "configuration reloaded"
	if force {
		msg = "configuration reloaded (forced)"
	}
	s.bal.Events().Add("reload", msg)
	s.log.Info(msg, "backends", len(cfg.Backends), "apps", len(cfg.Apps), "forced", force)
	return nil
}

// newCerts is what a reload gives the TLS listener.
type newCerts struct {
	set        *certs.Set
	minVersion uint16
}

// prepareReload reads, validates and checks the new configuration and the files it names
// (certificates included: one that cannot be read, does not match its key or has expired
// rejects the reload as config_invalid); it changes nothing but the admin settings, last, once
// everything else passed.
func (s *server) prepareReload(ctx context.Context, force bool) (*configs.Config, []byte, *newCerts, error) {
	data, err := configs.ReadSettled(ctx, s.path, configs.SettleGap, configs.SettleLimit)
	if err != nil {
		return nil, nil, nil, err
	}
	cfg, err := configs.Parse(data)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("load config %s: %w", s.path, err)
	}
	if err := s.checkStatic(cfg); err != nil {
		return nil, nil, nil, configs.Reject(configs.ReasonRestartRequired, err)
	}
	if err := configs.Guard(cfg, s.runningAddresses()); err != nil {
		if !force {
			return nil, nil, nil, err
		}
		s.log.Warn("forced reload: applying a configuration the reload guard would reject", "guard", err.Error())
	}
	secret, err := readSecret(cfg.Warning.SecretFile)
	if err != nil {
		return nil, nil, nil, err
	}
	var nc *newCerts
	if cfg.TLS.Listen != "" {
		set, minVersion, err := loadCertificates(cfg)
		if err != nil {
			return nil, nil, nil, configs.Reject(configs.ReasonInvalid, err)
		}
		nc = &newCerts{set: set, minVersion: minVersion}
	}
	if err := s.admin.Update(cfg.Admin.TokenFile, cfg.Admin.StateFile); err != nil {
		return nil, nil, nil, err
	}
	return cfg, secret, nc, nil
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
