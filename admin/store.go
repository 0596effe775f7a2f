package admin

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"pollbal/configs"
	"pollbal/store"
)

// ReasonStoreUnavailable is the reason (X-Pollbal-Reason and the JSON "reason") of a move that
// was refused because the shared store cannot be reached.
const ReasonStoreUnavailable = "store_unavailable"

// applyWait bounds how long a move waits, after etcd committed it, for this instance's watch to
// apply it before answering.
const applyWait = 2 * time.Second

// MoveStore is a shared store of moves (etcd): moves are written to it and come back through
// ApplyStore on every instance.
type MoveStore interface {
	// Put and Delete write a move and return its revision once committed; an error wrapping
	// store.ErrUnavailable means nothing changed. Delete also says whether the store held a
	// move to drop: when it did not, no update for the revision will come.
	Put(ctx context.Context, id, pool string) (int64, error)
	Delete(ctx context.Context, id string) (rev int64, dropped bool, err error)
	// WaitApplied waits until this instance applied revision rev.
	WaitApplied(ctx context.Context, rev int64) bool
	Status() store.Status
}

// stateAnswer is GET /api/state: the state and the store's.
type stateAnswer struct {
	State
	Store store.Status `json:"store"`
}

// storeStatus reports the store of moves: etcd's own status, else the state file (or memory).
func (s *Server) storeStatus() store.Status {
	if s.store != nil {
		return s.store.Status()
	}
	if s.settings.Load().stateFile != "" {
		return store.Status{Kind: store.KindFile, Up: true}
	}
	return store.Status{Kind: store.KindMemory, Up: true}
}

// storeMove writes a move (pool "" drops it) to the shared store and answers once this
// instance applied it.
func (s *Server) storeMove(ctx context.Context, c *call, pool string) result {
	var rev int64
	var err error
	changed := true
	if pool == "" {
		rev, changed, err = s.store.Delete(ctx, c.target)
	} else {
		rev, err = s.store.Put(ctx, c.target, pool)
	}
	if err != nil {
		if !errors.Is(err, store.ErrUnavailable) {
			return fail(http.StatusInternalServerError, "nothing changed: %v", err)
		}
		return result{code: http.StatusServiceUnavailable, body: errorBody{
			Error:  "the shared store of moves cannot be reached; nothing changed: " + err.Error(),
			Reason: ReasonStoreUnavailable,
		}}
	}
	if changed {
		c.revision = rev
	}
	// With no move in the store and none applied here, the answer is ready: nothing changed and
	// no update will come. A move still applied here was dropped by another instance just now;
	// the watch is delivering that.
	if _, applied := s.bal.Overrides()[c.target]; changed || applied {
		wctx, cancel := context.WithTimeout(ctx, applyWait)
		defer cancel()
		if !s.store.WaitApplied(wctx, rev) {
			s.log.Warn("a committed move was not applied here in time; it applies when the watch delivers it",
				"backend", c.target, "revision", rev)
		}
	}
	if pool == "" && !s.bal.Known(c.target) {
		return result{code: http.StatusOK, body: poolAnswer{ID: c.target}}
	}
	return s.answer(c.target)
}

// ApplyStore applies the moves read from the shared store: the balancer takes the whole set,
// the state file keeps it as the cache used at the next start, and each change is written to
// the log as an audit line with its revision.
func (s *Server) ApplyStore(u store.Update) {
	moves := validMoves(u.Moves, s.log)
	s.moveMu.Lock()
	defer s.moveMu.Unlock()
	s.bal.ReplaceOverrides(moves)
	if path := s.settings.Load().stateFile; path != "" {
		if err := SaveState(path, moves); err != nil {
			s.log.Error("cannot write the cache of shared moves to the state file", "state_file", path, "err", err)
		}
	}
	for _, c := range u.Changes {
		if c.Pool != "" && (!validBackendID(c.ID) || !configs.ValidPoolName(c.Pool)) {
			continue // ignored above, not applied
		}
		action := actionMove
		if c.Pool == "" {
			action = actionClear
		}
		s.log.LogAttrs(context.Background(), slog.LevelInfo, "admin move applied",
			slog.String("source", store.KindEtcd), slog.String("action", action), slog.String("target", c.ID),
			slog.String("pool", c.Pool), slog.Int64("revision", c.Revision), slog.Bool("resync", u.Resync))
	}
}

// validMoves is the moves read from the shared store less those whose key is not a backend id
// or whose value is not a pool name (logged): nothing else can be applied, and the state file,
// read back at the next start, must hold only what that read accepts.
func validMoves(moves map[string]string, log *slog.Logger) map[string]string {
	out := make(map[string]string, len(moves))
	for id, pool := range moves {
		if !validBackendID(id) || !configs.ValidPoolName(pool) {
			log.Warn("ignoring a shared move that is not a backend id and a pool name", "backend", id, "pool", pool)
			continue
		}
		out[id] = pool
	}
	return out
}
