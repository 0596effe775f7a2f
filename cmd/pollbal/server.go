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
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"pollbal/admin"
	"pollbal/balancer"
	"pollbal/configs"
	"pollbal/internal/accesslog"
	"pollbal/internal/alarms"
	"pollbal/internal/certs"
	"pollbal/internal/handover"
	"pollbal/internal/latch"
	"pollbal/internal/runstate"
	"pollbal/internal/secretfile"
	"pollbal/internal/store"
	"pollbal/poller"
	"pollbal/proxy"
	"pollbal/warning"
)

// recentEvents is how many events the status page keeps.
const recentEvents = 100

// server wires one pollbal instance: poller → balancer (+ warnings) → proxy, the alarms the
// balancer and the store report to, and the admin listener. It owns the reload path.
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

	bal    *balancer.Balancer
	alarms *alarms.Notifier // the balancer's and the store's alarms, and the events it lists them in
	events *alarms.Events   // the status page's events
	alog   *accesslog.Logger
	poll   *poller.Poller
	warn   *warning.Tracker
	proxy  *proxy.Proxy
	admin  *admin.Server
	certs  *certs.Store // nil without tls.listen
	moves  store.Store

	proxyLn, tlsLn, adminLn net.Listener // proxyLn is nil when listen is "", tlsLn without TLS

	// hand holds the listening sockets: inherited (systemd, an upgrade) or bound, and handed
	// to the process an upgrade starts (upgrade.go).
	hand    *handover.Handover
	state   *runstate.Writer // the runtime state in state_dir; nil without state_dir
	started time.Time
	// firstRound is set when the first check round has ended.
	firstRound *latch.Latch

	// runCtx is run's context (SIGINT/SIGTERM end it): an upgrade runs under it, whoever
	// asked for it. upgrading holds the one upgrade running; handedOver receives the new
	// process's pid once one took over, and run then shuts this one down.
	runCtx     context.Context
	upgrading  atomic.Bool
	handedOver chan int
	upgrades   sync.WaitGroup // upgrades that SIGUSR2 started
}

// newServer loads the configuration at path and builds one instance from it: its metrics, the
// admin moves the last run kept, the request pipeline, the admin side, the TLS certificates
// and the listeners. When it fails, nothing it opened stays open.
func newServer(path string, log *slog.Logger) (_ *server, err error) {
	cfg, err := configs.Load(path)
	if err != nil {
		return nil, err
	}
	s := &server{path: path, log: log, reg: prometheus.NewRegistry(), cfg: cfg, reloading: make(chan struct{}, 1),
		started: time.Now(), firstRound: latch.New(), handedOver: make(chan int, 1), runCtx: context.Background()}
	defer func() {
		if err != nil {
			s.closeBuilt()
		}
	}()
	s.registerMetrics()
	// First: it takes the sockets this process inherited, and clears the environment that
	// names them before anything could pass it on.
	if s.hand, err = handover.New(handover.Options{Names: listenerNames(cfg), Logger: log, Registerer: s.reg}); err != nil {
		return nil, err
	}
	moves, err := store.Load(cfg.Admin.StateFile, log)
	if err != nil {
		return nil, err
	}
	if s.state, err = s.newStateWriter(cfg); err != nil {
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

// buildPipeline builds what requests and checks go through: the alarms and events the
// balancer reports to, the balancer, the warning tracker that reads it after every check round,
// the poller that feeds both, and the proxy.
func (s *server) buildPipeline(cfg *configs.Config, moves store.Moves) error {
	var err error
	s.events = alarms.NewEvents(recentEvents, nil)
	if s.alarms, err = alarms.New(alarms.Options{Config: cfg, Events: s.events, Logger: s.log}); err != nil {
		return err
	}
	s.bal, err = balancer.New(balancer.Options{
		Config: cfg, Overrides: moves, Logger: s.log, Registerer: s.reg, Observer: s.alarms, Events: s.events,
	})
	if err != nil {
		return err
	}
	secret, err := readSecret(cfg.Warning.SecretFile)
	if err != nil {
		return err
	}
	s.warn, err = warning.NewTracker(warning.TrackerOptions{
		Members: s.bal, Events: s.events, Config: cfg,
		SenderOptions: warning.SenderOptions{
			Site: cfg.Site, Timeout: cfg.Warning.Timeout, Secret: secret, Logger: s.log, Registerer: s.reg,
		},
	})
	if err != nil {
		return err
	}
	s.poll, err = poller.New(poller.Options{
		Site: cfg.Site, Version: version, Settings: cfg.Poll, Targets: targets(cfg),
		Sink: sink{bal: s.bal, warn: s.warn, state: s.state, firstRound: s.firstRound}, Logger: s.log, Registerer: s.reg,
	})
	if err != nil {
		return err
	}
	s.alog, err = accesslog.New(accesslog.Options{Config: cfg.AccessLog, Registerer: s.reg, Logger: s.log})
	if err != nil {
		return fmt.Errorf("access_log.path: %w", err)
	}
	s.proxy, err = proxy.New(proxy.Options{Balancer: s.bal, Logger: s.log, Registerer: s.reg, AccessLog: s.alog})
	return err
}

// buildAdmin builds the store of moves (the state file, or etcd starting from the moves the
// state file kept) over the balancer, and the admin server over both.
func (s *server) buildAdmin(cfg *configs.Config, moves store.Moves) error {
	var err error
	s.moves, err = store.New(store.Options{
		StateFile: cfg.Admin.StateFile, Etcd: cfg.Admin.Store.Etcd, Initial: moves,
		Target: s.bal, Alarms: s.alarms, Events: s.events, Logger: s.log, Registerer: s.reg,
	})
	if err != nil {
		return err
	}
	s.admin, err = admin.New(admin.Options{
		Balancer: s.bal, Warnings: s.warn, Events: s.events, Version: version, Gatherer: s.reg, TokenFile: cfg.Admin.TokenFile,
		Store: s.moves, Reload: s.reload, Upgrade: s.upgrade, Started: s.started, Limits: adminLimits(cfg),
		Logger: s.log, Registerer: s.reg,
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
	return certs.NewStore(set, minVersion, alpnProtocols(cfg)), nil
}

// alpnProtocols are what the TLS listener offers by ALPN, in order of preference.
func alpnProtocols(cfg *configs.Config) []string {
	if cfg.HTTP2.Enabled {
		return []string{"h2", "http/1.1"}
	}
	return []string{"http/1.1"}
}

// closeBuilt closes what a failing newServer had built: the store's etcd client (whose
// goroutines and connections would otherwise stay), the warning tracker and the alarms (with
// nothing in flight before run, their Close returns at once). A failing listen closes the
// listeners it opened itself.
func (s *server) closeBuilt() {
	if s.moves != nil {
		_ = s.moves.Close()
	}
	if s.alog != nil {
		_ = s.alog.Close()
	}
	if s.warn != nil {
		s.warn.Close()
	}
	if s.alarms != nil {
		s.alarms.Close()
	}
}

// listenerNames are the listeners cfg has, in the order proxy, tls, admin.
func listenerNames(cfg *configs.Config) []string {
	var names []string
	if cfg.Listen != "" {
		names = append(names, handover.Proxy)
	}
	if cfg.TLS.Listen != "" {
		names = append(names, handover.TLS)
	}
	return append(names, handover.Admin)
}

// listen opens the listeners of cfg: plain (unless listen is ""), TLS (when tls.listen is set)
// and admin, each on the socket this process inherited for it (systemd, an upgrade) or bound
// now; on failure none stays open.
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
		if s.proxyLn, err = s.hand.Listen(handover.Proxy, cfg.Listen); err != nil {
			return fmt.Errorf("listen: %w", err)
		}
	}
	if cfg.TLS.Listen != "" {
		if s.tlsLn, err = s.hand.Listen(handover.TLS, cfg.TLS.Listen); err != nil {
			closeAll()
			return fmt.Errorf("tls.listen: %w", err)
		}
	}
	if s.adminLn, err = s.hand.Listen(handover.Admin, cfg.Admin.Listen); err != nil {
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

// run serves until ctx ends or an upgrade hands over, reloading on every hup, reopening the
// access log on every usr1 and upgrading on every usr2. It restores the runtime state first,
// before the poller and the listeners start; the process an upgrade started serves only once it
// is ready (restored or its first round ended), so that until then the old one answers every
// request. Readiness is then told to whoever waits (handover.Ready: the old process, or
// systemd).
//
// Teardown order: stop applying reloads, tell systemd (unless handed over), stop accepting
// client traffic and drain it (quiet connections closed, the requests in flight waited for up
// to proxy.shutdown_timeout; after a hand-over the admin listener closes at once too), write
// the access log's last lines and close it, stop polling, write the runtime state (unless
// handed over: the new process's is newer), wait for warning posts and alarm deliveries, close
// admin. A reload is never waited for: one still reading a file is abandoned with the process.
// An upgrade in progress is cancelled and waited for (its new process is killed).
func (s *server) run(ctx context.Context, hup, usr1, usr2 <-chan os.Signal) error {
	s.runCtx = ctx
	s.restoreState()
	s.log.Info("pollbal started", "version", version, "site", s.cfg.Site,
		"listen", addr(s.proxyLn), "tls", addr(s.tlsLn), "admin", s.adminLn.Addr().String(), "backends", len(s.cfg.Backends),
		"sockets_from", orNone(s.hand.Inherited()))
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
	defer s.upgrades.Wait() // after the shutdown below: SIGTERM cancelled any upgrade running
	if s.hand.Inherited() == "upgrade" && !s.bal.Ready() {
		s.log.Info("upgrade: waiting for the first check round before serving; the old process serves meanwhile")
		select {
		case <-s.firstRound.Done():
		case <-ctx.Done():
		}
	}
	s.serve(errs)
	// Not when already told to stop: an old process waiting would hand over to a process on
	// its way out.
	if ctx.Err() == nil {
		if err := s.hand.Ready(); err != nil {
			s.log.Warn("could not say that this process is ready", "err", err)
		}
	}
	reloadCtx, stopReloads := context.WithCancel(ctx)
	defer stopReloads()
	pending := make(chan struct{}, 1)
	go s.reloadOnSignal(reloadCtx, pending)
	reopen := make(chan struct{}, 1)
	go s.reopenOnSignal(reloadCtx, reopen)
	var runErr error
	handedOver := false
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
		case <-usr1:
			// Likewise, one pending reopen opens the file after this signal too.
			select {
			case reopen <- struct{}{}:
			default:
			}
		case <-usr2:
			s.upgrades.Add(1)
			go func() { defer s.upgrades.Done(); _, _ = s.upgrade(ctx) }() // it logs its outcome
		case pid := <-s.handedOver:
			s.log.Info("handed over to the new process: draining and exiting", "pid", pid)
			handedOver = true
			break loop
		case err := <-errs:
			if err != nil {
				runErr = err
				break loop
			}
		}
	}
	stopReloads()
	s.stopApplying()
	if err := s.hand.Stopping(); err != nil {
		s.log.Warn("could not tell the service manager that pollbal is stopping", "err", err)
	}
	drainTimeout := s.bal.Snapshot().Config().Proxy.ShutdownTimeout
	s.log.Info("shutting down: closing idle connections, waiting for requests in flight", "timeout", drainTimeout)
	drainCtx, cancel := context.WithTimeout(context.Background(), drainTimeout)
	defer cancel()
	adminDone := make(chan struct{})
	if handedOver {
		// Every admin connection from now on is the new process's.
		go func() { defer close(adminDone); _ = s.admin.Shutdown(drainCtx) }()
	}
	if err := s.proxy.Shutdown(drainCtx); err != nil {
		s.log.Warn("drain incomplete", "err", err)
	}
	if err := s.alog.Close(); err != nil {
		s.log.Warn("access log: closing failed; its last lines may be lost", "err", err)
	}
	stopPoll()
	wg.Wait()
	if s.state != nil {
		_ = s.state.Write() // nothing after a hand-over; a failure is logged by the writer
	}
	s.warn.Close()
	s.alarms.Close()
	if handedOver {
		<-adminDone
	} else {
		_ = s.admin.Shutdown(drainCtx)
	}
	s.log.Info("pollbal stopped")
	return runErr
}

// serve starts serving client traffic and the admin listener; serving errors go to errs.
func (s *server) serve(errs chan<- error) {
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
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
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

// reopenOnSignal reopens the access log's file when SIGUSR1 asks for it (one per value on
// pending; logrotate's postrotate), until ctx ends. It runs beside the signal loop: a reopen
// waits for a write in progress, which a slow disk may hold up.
func (s *server) reopenOnSignal(ctx context.Context, pending <-chan struct{}) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-pending:
			if err := s.alog.Reopen(); err != nil {
				s.log.Error("access log: reopen failed; still writing to the file open before", "err", err)
				continue
			}
			if path := s.bal.Snapshot().Config().AccessLog.Path; path != configs.AccessLogOff && path != configs.AccessLogStdout {
				s.log.Info("access log reopened", "path", path)
			}
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
	if cfg.HTTP2 != s.cfg.HTTP2 {
		errs = append(errs, errors.New("http2: changing it needs a restart"))
	}
	if cfg.StateDir != s.cfg.StateDir {
		errs = append(errs, fmt.Errorf("state_dir: changing %s to %s needs a restart", orOff(s.cfg.StateDir), orOff(cfg.StateDir)))
	}
	return configs.JoinProblems(errs...)
}

func orOff(listen string) string {
	if listen == "" {
		return `"" (off)`
	}
	return listen
}

// sink feeds check results into the balancer and, after every round, runs the warning round
// and writes the runtime state (at most once a second).
type sink struct {
	bal        *balancer.Balancer
	warn       *warning.Tracker
	state      *runstate.Writer // nil without state_dir
	firstRound *latch.Latch
}

// Observe hands a check result to the balancer as it is: both speak the protocol package's types,
// so nothing is converted or allocated per check.
func (k sink) Observe(r poller.Result) {
	k.bal.Observe(balancer.Observation{ID: r.ID, Address: r.Address, Ready: r.Ready, Reason: r.Reason, Reports: r.Reports,
		Checked: r.Checked, Load: r.Load})
}

// ConfirmAfter lets the balancer ask for a backend's load report to be confirmed soon.
func (k sink) ConfirmAfter(r poller.Result) time.Duration { return k.bal.ConfirmAfter(r.ID) }

func (k sink) RoundDone(time.Time) {
	k.bal.RoundDone()
	k.warn.Round()
	if k.state != nil {
		k.state.RoundDone()
	}
	k.firstRound.Set()
}
