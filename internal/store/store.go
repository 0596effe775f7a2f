package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"pollbal/configs"
	"pollbal/internal/defaults"
	"pollbal/internal/metric"
)

// Store is where admin moves live: File (the state file, or memory) or Etcd. Implementations
// are safe for concurrent use.
type Store interface {
	// Set moves backend id to pool: the move is kept (written to the file, or committed to
	// etcd) before it is applied, and Set returns once it is applied here (etcd: or after
	// applyWait, when the watch is slow to deliver it). rev is etcd's revision of the write, 0
	// for a file. An error means nothing changed: it wraps ErrInvalidPool, ErrUnknownBackend or
	// ErrUnavailable, or says why the move could not be kept.
	Set(ctx context.Context, id, pool string) (rev int64, err error)
	// Clear drops backend id's move (back to what the configuration says), as Set does. rev is
	// 0 when nothing was written: there was no move to drop.
	Clear(ctx context.Context, id string) (rev int64, err error)
	// SetStateFile applies a reloaded admin.state_file; when it fails nothing changes.
	SetStateFile(path string) error
	// Status is the store object of /api/state.
	Status() Status
	// Run follows the store until ctx ends (etcd's watch); a file returns at once.
	Run(ctx context.Context) error
	// Close releases the store; it is idempotent.
	Close() error
}

// Kinds of store, as /api/state names them.
const (
	KindEtcd   = "etcd"
	KindFile   = "file"
	KindMemory = "memory"
)

// Status is the store object of /api/state.
type Status struct {
	Kind     string `json:"kind"`
	Up       bool   `json:"up"`
	Revision int64  `json:"revision"`
}

// ErrUnavailable is a move refused because etcd cannot be reached: nothing changed.
var ErrUnavailable = errors.New("store unavailable")

// Audit actions of the "admin move applied" lines, as the admin API's audit lines name them.
const (
	ActionMove  = "move"
	ActionClear = "clear_override"
)

// Target is what moves are applied to: the balancer's overrides.
type Target interface {
	// Known reports whether id is a configured backend.
	Known(id string) bool
	// Overrides returns a copy of the moves applied.
	Overrides() map[string]string
	// SetOverride and ClearOverride apply one move; they fail for a backend that is not
	// configured (ClearOverride: and has no move).
	SetOverride(id, pool string) error
	ClearOverride(id string) error
	// ReplaceOverrides applies a whole set of valid moves, kept also for ids not configured.
	ReplaceOverrides(moves map[string]string) bool
}

// Alarms is where the store reports that etcd cannot be reached: the store_unavailable alarm,
// deduplicated by whoever raises it (package alarms).
type Alarms interface {
	StoreUnavailable(why string)
}

// Events is where the store notes that etcd can be reached again: the status page's events.
type Events interface {
	Add(kind, message string)
}

// Options configure New.
type Options struct {
	StateFile string        // admin.state_file; "" keeps moves in memory (with Etcd: no cache)
	Etcd      *configs.Etcd // admin.store.etcd; nil keeps the moves in StateFile
	// Initial is what Load read from StateFile: with Etcd, the cache that the first read of
	// etcd reports its changes against.
	Initial    Moves
	Target     Target
	Alarms     Alarms // optional
	Events     Events // optional
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

// New builds the store that o's configuration names and registers pollbal_store_up: a File
// (always up), or, with o.Etcd, an Etcd store over the files its configuration names (every
// problem with them is returned, each prefixed with its key). It does not wait for etcd.
func New(o Options) (Store, error) {
	if o.Target == nil {
		return nil, errors.New("store: nil target")
	}
	o.Logger = defaults.Logger(o.Logger)
	if o.Alarms == nil {
		o.Alarms = quiet{}
	}
	if o.Events == nil {
		o.Events = quiet{}
	}
	up := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "pollbal_store_up",
		Help: "1 while the store of admin moves can be used (always, for the local state file), 0 while etcd cannot be reached.",
	})
	if err := metric.Register(defaults.Registerer(o.Registerer), up); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	file := newFile(o.StateFile, o.Target, o.Logger)
	if o.Etcd == nil {
		up.Set(1)
		return file, nil
	}
	creds, problems := loadCredentials(o.Etcd)
	if len(problems) > 0 {
		errs := make([]error, len(problems))
		for i, p := range problems {
			errs[i] = errors.New(p)
		}
		return nil, errors.Join(errs...)
	}
	e, err := newEtcd(o, creds, file, up)
	if err != nil {
		return nil, fmt.Errorf("admin.store.etcd: %w", err)
	}
	return e, nil
}

// quiet is the Alarms and the Events of a store built without them.
type quiet struct{}

func (quiet) StoreUnavailable(string) {}
func (quiet) Add(string, string)      {}

var (
	_ Store = (*File)(nil)
	_ Store = (*Etcd)(nil)
)
