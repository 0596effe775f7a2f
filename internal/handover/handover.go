package handover

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"pollbal/internal/defaults"
	"pollbal/internal/metric"
)

// The names of pollbal's listeners, in systemd's LISTEN_FDNAMES (FileDescriptorName= in a
// socket unit) and in Listen.
const (
	Proxy = "proxy" // listen
	TLS   = "tls"   // tls.listen
	Admin = "admin" // admin.listen
)

// knownNames lists every listener name in the order a launcher without names passes them.
func knownNames() []string { return []string{Proxy, TLS, Admin} }

// DefaultReadyTimeout is how long Upgrade waits for the new process when Options say nothing.
const DefaultReadyTimeout = 30 * time.Second

const upgradesHelp = "Binary upgrades (SIGUSR2, POST /admin/upgrade) by result: ok (handed over), failed (could not start, exited, cancelled), timeout (not ready in time)."

// Results of pollbal_upgrades_total.
const (
	resultOK      = "ok"      // the new process signalled ready; the sockets are handed over
	resultFailed  = "failed"  // it could not start, exited, or the upgrade was cancelled
	resultTimeout = "timeout" // it was not ready in time and was killed
)

var (
	// ErrUpgradeInProgress is Upgrade's answer while another upgrade runs (HTTP 409).
	ErrUpgradeInProgress = errors.New("an upgrade is already in progress")
	// ErrHandedOver is Upgrade's answer after an upgrade succeeded: this process is on its way
	// out, and the new one takes the next upgrade (HTTP 409).
	ErrHandedOver = errors.New("the sockets are already handed over to a new process")
	// ErrNotReady is Upgrade's answer before Ready: a process that is still starting has
	// nothing to hand over yet, and its own old process may still be waiting for it (HTTP 409).
	ErrNotReady = errors.New("this process is not ready yet")
)

// Options configure New. The zero value works: upgrades start the binary this process was
// started from, with its arguments, and wait DefaultReadyTimeout.
type Options struct {
	// Names are the listeners the configuration has, in the order proxy, tls, admin (those
	// configured only): a launcher that passes sockets without names passes them in this
	// order, and a socket unit that passes a listener not among them is refused.
	Names []string
	// ReadyTimeout is how long Upgrade waits for the new process to signal ready;
	// DefaultReadyTimeout when 0.
	ReadyTimeout time.Duration
	// Path and Args are the program an upgrade starts and its arguments. Empty Path: the path
	// this process was started by (os.Args[0], absolute), resolved by New, so that a new
	// binary installed there is the one started. Nil Args: os.Args[1:].
	Path string
	Args []string
	// Logger and Registerer: see package defaults.
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

// Handover holds the sockets this process inherited or bound, and hands them to the process an
// upgrade starts. Make one with New. It is safe for concurrent use.
type Handover struct {
	log          *slog.Logger
	upgrades     map[string]prometheus.Counter // pollbal_upgrades_total by result
	from         string                        // who handed the sockets over: fromSystemd, fromUpgrade, ""
	path         string                        // the program an upgrade starts; "" when pathErr
	pathErr      error
	args         []string
	dir          string // the working directory at start: relative paths in args stay right
	readyTimeout time.Duration
	notifySocket string // NOTIFY_SOCKET at start; "" when no service manager listens

	mu        sync.Mutex
	inherited map[string]*net.TCPListener // inherited, not yet asked for by Listen
	listeners map[string]*net.TCPListener // returned by Listen: what an upgrade hands over
	readyPipe *os.File                    // the old process's readiness pipe until Ready
	ready     bool

	upgrading atomic.Bool  // an Upgrade runs
	handedTo  atomic.Int64 // the pid of the process the sockets went to; 0 before that
}

// New takes over what this process inherited, as its environment says (see doc.go), and
// removes the variables that said it from the environment, whatever it finds. An error means
// the environment names sockets that cannot be used: pollbal should not start.
func New(o Options) (*Handover, error) {
	for i, name := range o.Names {
		if !slices.Contains(knownNames(), name) || slices.Contains(o.Names[:i], name) {
			return nil, fmt.Errorf("listener names %q: want each of %s at most once", o.Names, strings.Join(knownNames(), ", "))
		}
	}
	inh, err := parseEnv(os.LookupEnv, os.Getpid(), o.Names)
	for _, v := range handoverVars() {
		_ = os.Unsetenv(v)
	}
	if err != nil {
		return nil, err
	}

	h := &Handover{
		log:          defaults.Logger(o.Logger),
		upgrades:     map[string]prometheus.Counter{},
		from:         inh.from,
		args:         o.Args,
		readyTimeout: o.ReadyTimeout,
		notifySocket: os.Getenv(envNotifySocket),
		inherited:    map[string]*net.TCPListener{},
		listeners:    map[string]*net.TCPListener{},
	}
	if h.readyTimeout <= 0 {
		h.readyTimeout = DefaultReadyTimeout
	}
	if h.args == nil {
		h.args = os.Args[1:]
	}
	h.dir, err = os.Getwd() // "" on error: the new process starts where this one is then
	switch {
	case o.Path != "":
		h.path = o.Path
	case err != nil:
		h.pathErr = fmt.Errorf("working directory: %w", err)
	default:
		h.path, h.pathErr = binaryPath(os.Args[0], h.dir, exec.LookPath, os.Executable)
	}

	counters := metric.Counters("pollbal_upgrades_total", upgradesHelp, "result")
	for _, r := range []string{resultOK, resultFailed, resultTimeout} {
		h.upgrades[r] = counters.WithLabelValues(r)
	}
	if err := metric.Register(defaults.Registerer(o.Registerer), counters); err != nil {
		return nil, err
	}

	if err := h.take(inh); err != nil {
		return nil, err
	}
	return h, nil
}

// take makes the inherited descriptors listeners and the readiness pipe; on error it closes
// the ones it took.
func (h *Handover) take(inh inheritance) error {
	for _, f := range inh.fds {
		ln, err := takeListener(f.fd, f.name)
		if err != nil {
			h.closeInherited("")
			return fmt.Errorf("inherited from %s: %w", inh.from, err)
		}
		h.inherited[f.name] = ln
	}
	if inh.readyFD >= 0 {
		pipe, err := takePipe(inh.readyFD)
		if err != nil {
			h.closeInherited("")
			return fmt.Errorf("inherited from %s: %w", inh.from, err)
		}
		h.readyPipe = pipe
	}
	return nil
}

// closeInherited closes the inherited listeners that Listen was not asked for, logging each
// with why when why is not empty. The caller holds h.mu or is New.
func (h *Handover) closeInherited(why string) {
	for name, ln := range h.inherited {
		if why != "" {
			h.log.Warn(why, "listener", name, "address", ln.Addr().String(), "from", h.from)
		}
		_ = ln.Close()
		delete(h.inherited, name)
	}
}

// Ready says this process serves: call it once it has loaded its configuration, restored its
// state, and serves on every listener Listen returned. It closes the inherited sockets that
// Listen was not asked for (a listener the configuration no longer has), then tells whoever
// waits: the old process when this one is an upgrade's (and nothing to the service manager,
// which the old process tells), else the service manager (READY=1) when it listens.
//
// An error means the old process or the service manager did not hear it. This process serves
// on regardless: it holds the sockets.
func (h *Handover) Ready() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ready {
		return nil
	}
	h.ready = true
	h.closeInherited("closed an inherited socket: the configuration has no such listener")
	if h.readyPipe == nil {
		return notify(h.notifySocket, "READY=1")
	}
	_, err := h.readyPipe.Write([]byte{readyByte})
	_ = h.readyPipe.Close()
	h.readyPipe = nil
	if err != nil {
		return fmt.Errorf("tell the old process this one is ready: %w", err)
	}
	return nil
}

// Stopping tells the service manager that this process begins to shut down (STOPPING=1) —
// unless it handed its sockets over: the new process is the service's main process then, and
// the service is not stopping.
func (h *Handover) Stopping() error {
	if h.handedTo.Load() != 0 {
		return nil
	}
	return notify(h.notifySocket, "STOPPING=1")
}

// Inherited says who handed this process its sockets: "systemd", "upgrade" (an old pollbal),
// or "" when nobody did.
func (h *Handover) Inherited() string { return h.from }
