package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"strings"

	"pollbal/balancer"
	"pollbal/configs"
	"pollbal/protocol"
)

// maxBodyBytes bounds every admin request body; a larger one is answered 413.
const maxBodyBytes = 4 << 10

// Admin actions, as written in the audit log.
const (
	actionListPools = "list_pools"
	actionMove      = "move"
	actionClear     = "clear_override"
	actionReload    = "reload"
	actionUnknown   = "unknown"
)

// call is one admin API call: what the router matched and what the audit line reports.
type call struct {
	action string
	target string // backend id, or "" when the action has none
	method string // the one method the action accepts
	pool   string // requested pool of a move, for the audit line
	force  bool   // a reload with ?force=true, for the audit line
	// revision is the shared store's revision of a committed move, for the audit line
	revision int64
}

// result is an admin API answer: a status and a JSON body.
type result struct {
	code int
	body any
}

func fail(code int, format string, args ...any) result {
	return result{code: code, body: errorBody{Error: fmt.Sprintf(format, args...)}}
}

// route maps an /admin/ path to its call; ok is false for a path the API does not have.
func route(path string) (c call, ok bool) {
	switch path {
	case "/admin/pools":
		return call{action: actionListPools, method: http.MethodGet}, true
	case "/admin/reload":
		return call{action: actionReload, method: http.MethodPost}, true
	}
	if rest, found := strings.CutPrefix(path, "/admin/backends/"); found {
		if id, found := strings.CutSuffix(rest, "/pool"); found && id != "" && !strings.Contains(id, "/") {
			return call{action: actionMove, target: id}, true
		}
	}
	return call{action: actionUnknown, target: path}, false
}

// serveAdmin answers every /admin/ request: authorisation, routing, a bounded body, the action,
// and one audit line whatever the outcome.
func (s *Server) serveAdmin(w http.ResponseWriter, r *http.Request) {
	c, found := route(r.URL.Path)
	res := s.dispatch(w, r, &c, found)
	if res.code == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="pollbal admin"`)
	}
	if e, ok := res.body.(errorBody); ok && e.Reason == ReasonStoreUnavailable {
		w.Header().Set(protocol.HeaderReason, e.Reason)
	}
	writeJSON(w, res.code, res.body)
	attrs := []slog.Attr{
		slog.String("remote", r.RemoteAddr),
		slog.String("method", r.Method),
		slog.String("action", c.action),
		slog.String("target", c.target),
		slog.Int("status", res.code),
	}
	if c.pool != "" {
		attrs = append(attrs, slog.String("pool", c.pool))
	}
	if c.revision != 0 {
		attrs = append(attrs, slog.Int64("revision", c.revision))
	}
	if c.action == actionReload && c.force {
		attrs = append(attrs, slog.Bool("force", true))
	}
	if e, ok := res.body.(errorBody); ok {
		if e.Reason != "" {
			attrs = append(attrs, slog.String("reason", e.Reason))
		}
		attrs = append(attrs, slog.String("error", e.Error))
	}
	s.log.LogAttrs(r.Context(), slog.LevelInfo, "admin call", attrs...)
}

func (s *Server) dispatch(w http.ResponseWriter, r *http.Request, c *call, found bool) result {
	switch err := authorize(r, s.settings.Load().digest); {
	case errors.Is(err, errAdminDisabled):
		return fail(http.StatusForbidden, "%v", err)
	case err != nil:
		return fail(http.StatusUnauthorized, "%v", err)
	}
	if !found {
		return fail(http.StatusNotFound, "no admin endpoint %s", r.URL.Path)
	}
	if c.action == actionMove {
		switch r.Method {
		case http.MethodPut:
			c.method = http.MethodPut
		case http.MethodDelete:
			c.method, c.action = http.MethodDelete, actionClear
		default:
			w.Header().Set("Allow", "PUT, DELETE")
			return fail(http.StatusMethodNotAllowed, "method %s not allowed on %s (PUT or DELETE)", r.Method, r.URL.Path)
		}
	}
	if r.Method != c.method {
		w.Header().Set("Allow", c.method)
		return fail(http.StatusMethodNotAllowed, "method %s not allowed on %s (%s)", r.Method, r.URL.Path, c.method)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return fail(http.StatusRequestEntityTooLarge, "request body over %d bytes", maxBodyBytes)
	case err != nil:
		return fail(http.StatusBadRequest, "read request body: %v", err)
	}
	switch c.action {
	case actionListPools:
		return result{code: http.StatusOK, body: map[string]any{"pools": s.bal.Pools()}}
	case actionMove:
		return s.move(r.Context(), c, body)
	case actionClear:
		if s.store != nil {
			if _, moved := s.bal.Overrides()[c.target]; !moved && !s.bal.Known(c.target) {
				return fail(http.StatusNotFound, "unknown backend %q", c.target)
			}
			return s.storeMove(r.Context(), c, "")
		}
		return s.clear(c.target)
	default:
		force, err := parseForce(r.URL.RawQuery)
		if err != nil {
			return fail(http.StatusBadRequest, "%v", err)
		}
		c.force = force
		return s.doReload(r.Context(), force)
	}
}

// moveRequest is the body of PUT /admin/backends/{id}/pool.
type moveRequest struct {
	Pool *string `json:"pool"`
}

// poolAnswer is the answer to a move: where the backend is now and why.
type poolAnswer struct {
	ID         string `json:"id"`
	Pool       string `json:"pool"`
	PoolSource string `json:"pool_source"`
}

// move persists the new override set, then applies it: when the state file cannot be written
// nothing changes.
func (s *Server) move(ctx context.Context, c *call, body []byte) result {
	var req moveRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || dec.More() || req.Pool == nil {
		return fail(http.StatusBadRequest, `body must be the JSON object {"pool":"<name>"}`)
	}
	c.pool = *req.Pool
	if !configs.ValidPoolName(c.pool) {
		return fail(http.StatusBadRequest, "invalid pool name %q: want [a-z0-9][a-z0-9_.-]{0,62}", c.pool)
	}
	if !s.bal.Known(c.target) {
		return fail(http.StatusNotFound, "unknown backend %q", c.target)
	}
	if s.store != nil {
		return s.storeMove(ctx, c, c.pool)
	}
	s.moveMu.Lock()
	defer s.moveMu.Unlock()
	old := s.bal.Overrides()
	next := maps.Clone(old)
	next[c.target] = c.pool
	if err := s.persist(old, next); err != nil {
		return fail(http.StatusInternalServerError, "nothing changed: %v", err)
	}
	if err := s.bal.SetOverride(c.target, c.pool); err != nil {
		s.restore(old)
		return overrideFailed(err)
	}
	return s.answer(c.target)
}

// clear drops a backend's override after persisting the set without it.
func (s *Server) clear(id string) result {
	s.moveMu.Lock()
	defer s.moveMu.Unlock()
	old := s.bal.Overrides()
	if _, ok := old[id]; !ok {
		if !s.bal.Known(id) {
			return fail(http.StatusNotFound, "unknown backend %q", id)
		}
		return s.answer(id) // nothing to drop
	}
	next := maps.Clone(old)
	delete(next, id)
	if err := s.persist(old, next); err != nil {
		return fail(http.StatusInternalServerError, "nothing changed: %v", err)
	}
	if err := s.bal.ClearOverride(id); err != nil {
		s.restore(old)
		return overrideFailed(err)
	}
	if !s.bal.Known(id) { // an override left behind by a reload that removed the backend
		return result{code: http.StatusOK, body: poolAnswer{ID: id}}
	}
	return s.answer(id)
}

// persist writes next to the state file, if one is configured. When the file was replaced but
// the write still failed (the directory fsync), the old set is written back so that file and
// balancer keep agreeing.
func (s *Server) persist(old, next map[string]string) error {
	path := s.settings.Load().stateFile
	if path == "" {
		return nil
	}
	replaced, err := saveState(path, next)
	if err != nil && replaced {
		s.restore(old)
	}
	return err
}

// restore writes old back to the state file after a failed move.
func (s *Server) restore(old map[string]string) {
	path := s.settings.Load().stateFile
	if path == "" {
		return
	}
	if err := SaveState(path, old); err != nil {
		s.log.Error("cannot restore the admin state file; it may not match the running overrides",
			"state_file", path, "err", err)
	}
}

// overrideFailed maps the balancer's override errors to answers; a backend can vanish between
// the check and the call when a reload removes it.
func overrideFailed(err error) result {
	switch {
	case errors.Is(err, balancer.ErrUnknownBackend):
		return fail(http.StatusNotFound, "%v", err)
	case errors.Is(err, balancer.ErrInvalidPool):
		return fail(http.StatusBadRequest, "%v", err)
	}
	return fail(http.StatusInternalServerError, "%v", err)
}

func (s *Server) answer(id string) result {
	pool, source, ok := s.bal.Snapshot().PoolOf(id)
	if !ok {
		return fail(http.StatusNotFound, "unknown backend %q", id)
	}
	return result{code: http.StatusOK, body: poolAnswer{ID: id, Pool: pool, PoolSource: source}}
}

func (s *Server) doReload(ctx context.Context, force bool) result {
	if s.reload == nil {
		return fail(http.StatusNotImplemented, "reload is not available")
	}
	if err := s.reload(ctx, force); err != nil {
		reason := configs.ReasonOf(err)
		return result{code: reloadRejectedCode(reason), body: errorBody{
			Error:    "reload rejected (" + reason + "); the running configuration stays: " + err.Error(),
			Reason:   reason,
			Problems: configs.Problems(err),
		}}
	}
	answer := map[string]any{"status": "reloaded"}
	if force {
		answer["forced"] = true
	}
	return result{code: http.StatusOK, body: answer}
}

// reloadRejectedCode is the status of a rejected reload: 409 when the same file may be applied
// later or forced (the file was changing, the guard refused it), 500 when the file is wrong.
func reloadRejectedCode(reason string) int {
	switch reason {
	case configs.ReasonChanging, configs.ReasonGuard:
		return http.StatusConflict
	}
	return http.StatusInternalServerError
}

// parseForce reads POST /admin/reload's query strictly: nothing, or force=true or force=false
// once. Anything else is an error (400), so that a mistyped force never silently does not force
// or forces.
func parseForce(rawQuery string) (bool, error) {
	if rawQuery == "" {
		return false, nil
	}
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return false, fmt.Errorf("bad query %q: %v", rawQuery, err)
	}
	for k := range q {
		if k != "force" {
			return false, fmt.Errorf("unknown query parameter %q (only force=true|false)", k)
		}
	}
	v := q["force"]
	if len(v) != 1 {
		return false, errors.New("force given more than once")
	}
	switch v[0] {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, fmt.Errorf("force=%q: want true or false", v[0])
}
