package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"reflect"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"pollbal/admin"
	"pollbal/balancer"
	"pollbal/certs"
	"pollbal/configs"
	"pollbal/poller"
	"pollbal/proxy"
	"pollbal/secretfile"
	"pollbal/store"
	"pollbal/warning"
)

// server wires one pollbal instance: poller → balancer (+ warnings) → proxy, and the admin
// listener. It owns the reload path.
type server struct {
	path string
	log  *slog.Logger
	reg  *prometheus.Registry

	reloadOK       prometheus.Gauge
	reloadRejected *prometheus.CounterVec

	// reloading holds a token while a reload runs: reloads take turns, and one that waits for
	// its turn can give up (its context ends) instead of blocking its caller.
	reloading chan struct{}
	cfg       *configs.Config // the applied configuration; read and written by the reload that holds the turn

	// applyMu guards stopped. A reload applies its configuration holding it, and only while
	// stopped is false; shutdown sets stopped first, so that nothing is applied while the
	// pieces are taken down, and a reload still reading files is abandoned, never half-applied.
	applyMu sync.Mutex
	stopped bool

	bal   *balancer.Balancer
	poll  *poller.Poller
	warn  *warning.Tracker
	proxy *proxy.Proxy
	admin *admin.Server
	certs *certs.Store // nil without tls.listen
	moves store.Store

	proxyLn, tlsLn, adminLn net.Listener // proxyLn is nil when listen is "", tlsLn without TLS
}

// newServer loads the configuration at path and builds one instance from it: its metrics, the
// admin moves the last run kept, the request pipeline, the admin side, the TLS certificates
// and the listeners. When it fails, nothing it opened stays open.
func newServer(path string, log *slog.Logger) (_ *server, err error) {
	cfg, err := configs.Load(path)
	if err != nil {
		return nil, err
	}
	s := &server{path: path, log: log, reg: prometheus.NewRegistry(), cfg: cfg, reloading: make(chan struct{}, 1)}
	defer func() {
		if err != nil {
			s.closeBuilt()
		}
	}()
	s.registerMetrics()
	moves, err := store.Load(cfg.Admin.StateFile, log)
	if err != nil {
		return nil, err
	}
	if err = s.buildPipeline(cfg, moves); err != nil {
		return nil, err
	}
	if err = s.buildAdmin(cfg, moves); err != nil {
		return nil, err
	}
	if s.certs, err = newCertStore(cfg); err != nil {
		return nil, err
	}
	raiseFileLimit(log, filesNeeded(cfg))
	if err = s.listen(cfg); err != nil {
		return nil, err
	}
	return s, nil
}

// registerMetrics registers the Go and process collectors and the reload metrics.
func (s *server) registerMetrics() {
	s.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	s.reloadOK = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "pollbal_config_last_reload_successful",
		Help: "1 when the last configuration load (start or reload) succeeded, 0 when it was rejected.",
	})
	s.reg.MustRegister(s.reloadOK)
	s.reloadOK.Set(1)
	s.reloadRejected = newReloadRejected(s.reg)
}

// buildPipeline builds what requests and checks go through: the balancer, the warning tracker
// that reads it after every check round, the poller that feeds both, and the proxy.
func (s *server) buildPipeline(cfg *configs.Config, moves store.Moves) error {
	var err error
	s.bal, err = balancer.New(balancer.Options{
		Config: cfg, Overrides: moves, Version: version, Logger: s.log, Registerer: s.reg,
	})
	if err != nil {
		return err
	}
	secret, err := readSecret(cfg.Warning.SecretFile)
	if err != nil {
		return err
	}
	s.warn, err = warning.NewTracker(warning.TrackerOptions{
		Members: s.bal, Events: s.bal.Events(), Config: cfg,
		SenderOptions: warning.SenderOptions{
			Site: cfg.Site, Timeout: cfg.Warning.Timeout, Secret: secret, Logger: s.log, Registerer: s.reg,
		},
	})
	if err != nil {
		return err
	}
	s.poll, err = poller.New(poller.Options{
		Site: cfg.Site, Version: version, Settings: cfg.Poll, Targets: targets(cfg),
		Sink: sink{bal: s.bal, warn: s.warn}, Logger: s.log, Registerer: s.reg,
	})
	if err != nil {
		return err
	}
	s.proxy, err = proxy.New(proxy.Options{Balancer: s.bal, Logger: s.log, Registerer: s.reg})
	return err
}

// buildAdmin builds the store of moves (the state file, or etcd starting from the moves the
// state file kept) over the balancer, and the admin server over both.
func (s *server) buildAdmin(cfg *configs.Config, moves store.Moves) error {
	var err error
	s.moves, err = store.New(store.Options{
		StateFile: cfg.Admin.StateFile, Etcd: cfg.Admin.Store.Etcd, Initial: moves,
		Target: s.bal, Events: s.bal.Events(), Logger: s.log, Registerer: s.reg,
	})
	if err != nil {
		return err
	}
	s.admin, err = admin.New(admin.Options{
		Balancer: s.bal, Warnings: s.warn, Gatherer: s.reg, TokenFile: cfg.Admin.TokenFile,
		Store: s.moves, Reload: s.reload, Limits: adminLimits(cfg), Logger: s.log, Registerer: s.reg,
	})
	return err
}

// adminLimits are the admin listener's connection limits in cfg: its own cap, and the client
// side's header and idle timeouts.
func adminLimits(cfg *configs.Config) admin.Limits {
	return admin.Limits{
		MaxConnections: cfg.Admin.MaxConnections,
		HeaderTimeout:  cfg.Proxy.HeaderTimeout,
		IdleTimeout:    cfg.Proxy.IdleTimeout,
	}
}

// newCertStore loads the TLS listener's certificates; nil without tls.listen.
func newCertStore(cfg *configs.Config) (*certs.Store, error) {
	if cfg.TLS.Listen == "" {
		return nil, nil
	}
	set, minVersion, err := loadCertificates(cfg)
	if err != nil {
		return nil, err
	}
	return certs.NewStore(set, minVersion), nil
}

// closeBuilt closes what a failing newServer had built: the store's etcd client (whose
// goroutines and connections would otherwise stay), the warning tracker and the balancer (with
// nothing in flight before run, their Close returns at once). A failing listen closes the
// listeners it opened itself.
func (s *server) closeBuilt() {
	if s.moves != nil {
		_ = s.moves.Close()
	}
	if s.warn != nil {
		s.warn.Close()
	}
	if s.bal != nil {
		s.bal.Close()
	}
}

// listen opens the listeners of cfg: plain (unless listen is ""), TLS (when tls.listen is set)
// and admin; on failure none stays open.
func (s *server) listen(cfg *configs.Config) error {
	var err error
	closeAll := func() {
		for _, ln := range []net.Listener{s.proxyLn, s.tlsLn, s.adminLn} {
			if ln != nil {
				ln.Close()
			}
		}
	}
	if cfg.Listen != "" {
		if s.proxyLn, err = net.Listen("tcp", cfg.Listen); err != nil {
			return fmt.Errorf("listen: %w", err)
		}
	}
	if cfg.TLS.Listen != "" {
		if s.tlsLn, err = net.Listen("tcp", cfg.TLS.Listen); err != nil {
			closeAll()
			return fmt.Errorf("tls.listen: %w", err)
		}
	}
	if s.adminLn, err = net.Listen("tcp", cfg.Admin.Listen); err != nil {
		closeAll()
		return fmt.Errorf("admin.listen: %w", err)
	}
	return nil
}

// loadCertificates reads and checks the certificates of cfg's TLS listener (every problem at
// once: configs.Problems lists them).
func loadCertificates(cfg *configs.Config) (*certs.Set, uint16, error) {
	minVersion, err := certs.Version(cfg.TLS.MinVersion)
	if err != nil {
		return nil, 0, err
	}
	set, err := certs.Load(cfg.TLS.Certificates, time.Now())
	if err != nil {
		return nil, 0, err
	}
	return set, minVersion, nil
}

// addr is a listener's address for the log, "off" for none.
func addr(ln net.Listener) string {
	if ln == nil {
		return "off"
	}
	return ln.Addr().String()
}

func readSecret(path string) ([]byte, error) {
	if path == "" {
		return nil, nil
	}
	secret, err := secretfile.Read(path)
	if err != nil {
		return nil, fmt.Errorf("warning.secret_file: %w", err)
	}
	return secret, nil
}

func targets(cfg *configs.Config) []poller.Target {
	out := make([]poller.Target, len(cfg.Backends))
	for i, b := range cfg.Backends {
		out[i] = poller.Target{ID: b.ID, Address: b.Address}
	}
	return out
}

// run serves until ctx ends, reloading on every hup. Teardown order: stop applying reloads,
// stop accepting client traffic, close its quiet connections and wait up to
// proxy.shutdown_timeout for the requests in flight, stop polling, wait for warning posts and
// alarm deliveries, close admin. A reload is never waited for: one still reading a file is
// abandoned with the process.
func (s *server) run(ctx context.Context, hup <-chan os.Signal) error {
	s.log.Info("pollbal started", "version", version, "site", s.cfg.Site,
		"listen", addr(s.proxyLn), "tls", addr(s.tlsLn), "admin", s.adminLn.Addr().String(), "backends", len(s.cfg.Backends))
	s.warnAbout(nil, s.cfg)
	pollCtx, stopPoll := context.WithCancel(context.Background())
	defer stopPoll()
	errs := make(chan error, 4)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = s.poll.Run(pollCtx) }()
	wg.Add(1)
	go func() { defer wg.Done(); _ = s.moves.Run(pollCtx) }()
	defer s.moves.Close()
	if s.proxyLn != nil {
		go func() { errs <- s.proxy.Serve(s.proxyLn) }()
	}
	if s.tlsLn != nil {
		go func() { errs <- s.proxy.ServeTLS(s.tlsLn, s.certs.ServerConfig()) }()
	}
	go func() {
		if err := s.admin.Serve(s.adminLn); !errors.Is(err, http.ErrServerClosed) {
			errs <- fmt.Errorf("admin: %w", err)
		}
	}()
	reloadCtx, stopReloads := context.WithCancel(ctx)
	defer stopReloads()
	pending := make(chan struct{}, 1)
	go s.reloadOnSignal(reloadCtx, pending)
	var runErr error
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-hup:
			// One pending reload is enough: it reads the file after this signal too.
			select {
			case pending <- struct{}{}:
			default:
			}
		case err := <-errs:
			if err != nil {
				runErr = err
				break loop
			}
		}
	}
	stopReloads()
	s.stopApplying()
	drainTimeout := s.bal.Snapshot().Config().Proxy.ShutdownTimeout
	s.log.Info("shutting down: closing idle connections, waiting for requests in flight", "timeout", drainTimeout)
	drainCtx, cancel := context.WithTimeout(context.Background(), drainTimeout)
	defer cancel()
	if err := s.proxy.Shutdown(drainCtx); err != nil {
		s.log.Warn("drain incomplete", "err", err)
	}
	stopPoll()
	wg.Wait()
	s.warn.Close()
	s.bal.Close()
	_ = s.admin.Shutdown(drainCtx)
	s.log.Info("pollbal stopped")
	return runErr
}

// reloadOnSignal runs the reloads that SIGHUP asks for (one per value on pending), one after
// the other, until ctx ends. It runs beside the signal loop, so that a reload that takes long
// (a file that does not settle, a named file that blocks its reader) never delays SIGTERM.
func (s *server) reloadOnSignal(ctx context.Context, pending <-chan struct{}) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-pending:
			_ = s.reload(ctx, false) // SIGHUP never forces
		}
	}
}

// checkStatic rejects changes that need a restart rather than half-applying them; each change
// is its own problem (configs.Problems lists them one per item).
func (s *server) checkStatic(cfg *configs.Config) error {
	var errs []error
	if cfg.Listen != s.cfg.Listen {
		errs = append(errs, fmt.Errorf("listen: changing %s to %s needs a restart", s.cfg.Listen, cfg.Listen))
	}
	if cfg.Admin.Listen != s.cfg.Admin.Listen {
		errs = append(errs, fmt.Errorf("admin.listen: changing %s to %s needs a restart", s.cfg.Admin.Listen, cfg.Admin.Listen))
	}
	if cfg.TLS.Listen != s.cfg.TLS.Listen {
		errs = append(errs, fmt.Errorf("tls.listen: changing %s to %s needs a restart", orOff(s.cfg.TLS.Listen), orOff(cfg.TLS.Listen)))
	}
	if !reflect.DeepEqual(cfg.Admin.Store, s.cfg.Admin.Store) {
		errs = append(errs, errors.New("admin.store: changing the store of moves needs a restart"))
	}
	if cfg.Site != s.cfg.Site {
		errs = append(errs, fmt.Errorf("site: changing %s to %s needs a restart", s.cfg.Site, cfg.Site))
	}
	return configs.JoinProblems(errs...)
}

func orOff(listen string) string {
	if listen == "" {
		return `"" (off)`
	}
	return listen
}

// sink feeds check results into the balancer and, after every round, runs the warning round.
type sink struct {
	bal  *balancer.Balancer
	warn *warning.Tracker
}

// Observe hands a check result to the balancer as it is: both speak the report package's types,
// so nothing is converted or allocated per check.
func (k sink) Observe(r poller.Result) {
	k.bal.Observe(balancer.Observation{ID: r.ID, Address: r.Address, Ready: r.Ready, Reason: r.Reason, Reports: r.Reports,
		Checked: r.Checked, Load: r.Load})
}

// ConfirmAfter lets the balancer ask for a backend's load report to be confirmed soon
// (poller.Confirmer).
func (k sink) ConfirmAfter(r poller.Result) time.Duration { return k.bal.ConfirmAfter(r.ID) }

func (k sink) RoundDone(time.Time) {
	k.bal.RoundDone()
	k.warn.Round()
}
