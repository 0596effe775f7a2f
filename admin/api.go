package admin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"

	"pollbal/configs"
	"pollbal/internal/handover"
	"pollbal/internal/store"
	"pollbal/protocol"
)

// maxBodyBytes bounds every admin request body; a larger one is answered 413.
const maxBodyBytes = 4 << 10

// Admin actions, as written in the audit log.
const (
	actionListPools = "list_pools"
	actionMove      = store.ActionMove
	actionClear     = store.ActionClear
	actionReload    = "reload"
	actionUpgrade   = "upgrade"
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
	// pid is the new process of an upgrade, for the audit line
	pid int
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
	case "/admin/upgrade":
		return call{action: actionUpgrade, method: http.MethodPost}, true
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
	if c.pid != 0 {
		attrs = append(attrs, slog.Int("pid", c.pid))
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
		return result{code: http.StatusOK, body: map[string]any{"pools": s.pools(s.bal.Snapshot())}}
	case actionMove:
		return s.move(r.Context(), c, body)
	case actionClear:
		return s.clear(r.Context(), c)
	case actionUpgrade:
		if r.URL.RawQuery != "" {
			return fail(http.StatusBadRequest, "unknown query %q (POST /admin/upgrade takes none)", r.URL.RawQuery)
		}
		return s.doUpgrade(r.Context(), c)
	default:
		force, err := parseForce(r.URL.RawQuery)
		if err != nil {
			return fail(http.StatusBadRequest, "%v", err)
		}
		c.force = force
		return s.doReload(r.Context(), force)
	}
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

// doUpgrade runs a binary upgrade and answers 200 with the new process's pid once it is
// ready; 409 while another upgrade runs, after this process handed over, or before it is ready
// itself; 500 with why when the new process failed (this one keeps serving).
func (s *Server) doUpgrade(ctx context.Context, c *call) result {
	if s.upgrade == nil {
		return fail(http.StatusNotImplemented, "upgrade is not available")
	}
	pid, err := s.upgrade(ctx)
	c.pid = pid // the new process, or the one that failed (0 when none started)
	switch {
	case errors.Is(err, handover.ErrUpgradeInProgress), errors.Is(err, handover.ErrHandedOver), errors.Is(err, handover.ErrNotReady):
		return fail(http.StatusConflict, "%v", err)
	case err != nil:
		return fail(http.StatusInternalServerError, "%v; this process keeps serving", err)
	}
	return result{code: http.StatusOK, body: map[string]any{"status": "upgraded", "pid": pid}}
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
