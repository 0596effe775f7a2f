package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"pollbal/internal/store"
)

// ReasonStoreUnavailable is the reason (X-Pollbal-Reason and the JSON "reason") of a move that
// was refused because the shared store cannot be reached.
const ReasonStoreUnavailable = "store_unavailable"

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

// stateAnswer is GET /api/state: the state and the store's.
type stateAnswer struct {
	State
	Store store.Status `json:"store"`
}

// move moves a backend through the store, which keeps the move before it applies it: when it
// cannot, nothing changes.
func (s *Server) move(ctx context.Context, c *call, body []byte) result {
	var req moveRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || dec.More() || req.Pool == nil {
		return fail(http.StatusBadRequest, `body must be the JSON object {"pool":"<name>"}`)
	}
	c.pool = *req.Pool
	rev, err := s.store.Set(ctx, c.target, c.pool)
	if err != nil {
		return moveFailed(err)
	}
	c.revision = rev
	return s.answer(c.target)
}

// clear drops a backend's move through the store.
func (s *Server) clear(ctx context.Context, c *call) result {
	rev, err := s.store.Clear(ctx, c.target)
	if err != nil {
		return moveFailed(err)
	}
	c.revision = rev
	if !s.bal.Known(c.target) { // a move left behind by a reload that removed the backend
		return result{code: http.StatusOK, body: poolAnswer{ID: c.target}}
	}
	return s.answer(c.target)
}

// moveFailed is the answer to a move the store refused; nothing changed.
func moveFailed(err error) result {
	switch {
	case errors.Is(err, store.ErrInvalidPool):
		return fail(http.StatusBadRequest, "%v", err)
	case errors.Is(err, store.ErrUnknownBackend):
		return fail(http.StatusNotFound, "%v", err)
	case errors.Is(err, store.ErrUnavailable):
		return result{code: http.StatusServiceUnavailable, body: errorBody{
			Error:  "the shared store of moves cannot be reached; nothing changed: " + err.Error(),
			Reason: ReasonStoreUnavailable,
		}}
	}
	return fail(http.StatusInternalServerError, "nothing changed: %v", err)
}

func (s *Server) answer(id string) result {
	pool, source, ok := s.bal.Snapshot().PoolOf(id)
	if !ok {
		return fail(http.StatusNotFound, "unknown backend %q", id)
	}
	return result{code: http.StatusOK, body: poolAnswer{ID: id, Pool: pool, PoolSource: source}}
}
