package store

import (
	"errors"
	"fmt"
	"log/slog"
	"net"

	"pollbal/configs"
)

// Moves are admin moves: backend id → node pool.
type Moves map[string]string

// Errors of a move that cannot be made. Set and Clear return ErrInvalidPool and
// ErrUnknownBackend (admin maps them, and ErrUnavailable, to HTTP answers); ErrInvalidBackendID
// comes only from Validate, since a configured backend's id is valid.
var (
	ErrInvalidPool      = errors.New("invalid pool name")
	ErrInvalidBackendID = errors.New("invalid backend id")
	ErrUnknownBackend   = errors.New("unknown backend")
)

// poolGrammar is configs' pool name rule, as error messages show it.
const poolGrammar = `[a-z0-9][a-z0-9_.-]{0,62}`

// Validate reports whether id → pool is a move that can be kept and applied: id is what the
// configuration accepts as a backend id, pool a well-formed pool name. Moves read from the
// state file and from etcd pass through it; Set checks the pool the same way (checkPool) and
// that the backend is configured, which makes its id valid.
func Validate(id, pool string) error {
	if !validBackendID(id) {
		return fmt.Errorf("%w %q", ErrInvalidBackendID, id)
	}
	return checkPool(pool)
}

// checkPool is Validate's pool rule.
func checkPool(pool string) error {
	if !configs.ValidPoolName(pool) {
		return fmt.Errorf("%w %q: want %s", ErrInvalidPool, pool, poolGrammar)
	}
	return nil
}

// validBackendID accepts what the configuration accepts as a backend id: a name token, or the
// backend's address (host:port), which is the default id.
func validBackendID(id string) bool {
	if configs.ValidServiceName(id) {
		return true
	}
	_, port, err := net.SplitHostPort(id)
	return err == nil && port != ""
}

// validMoves is moves less those Validate refuses (each logged): nothing else can be applied,
// and the state file, read back at the next start, must hold only what that read accepts.
func validMoves(moves Moves, log *slog.Logger) Moves {
	out := make(Moves, len(moves))
	for id, pool := range moves {
		if Validate(id, pool) != nil {
			log.Warn("ignoring a shared move that is not a backend id and a pool name", "backend", id, "pool", pool)
			continue
		}
		out[id] = pool
	}
	return out
}

// unknownBackend is the error of a move for a backend that is not configured.
func unknownBackend(id string) error { return fmt.Errorf("%w %q", ErrUnknownBackend, id) }
