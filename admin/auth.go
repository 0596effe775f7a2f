package admin

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"pollbal/internal/secretfile"
)

// readToken reads and trims the bearer token; "" means the admin API is disabled (nil digest).
// Only the token's SHA-256 is kept, so comparisons take the same time whatever its length.
func readToken(path string) (*[32]byte, error) {
	if path == "" {
		return nil, nil
	}
	token, err := secretfile.Read(path)
	if err != nil {
		return nil, fmt.Errorf("read token: %w", err)
	}
	d := sha256.Sum256(token)
	return &d, nil
}

// Authorisation failures; serveAdmin maps them to 403 and 401.
var (
	errAdminDisabled = errors.New("admin API disabled: no admin.token_file configured")
	errUnauthorized  = errors.New("missing or wrong bearer token")
)

// authorize checks "Authorization: Bearer <token>" against the configured token in constant time.
func authorize(r *http.Request, digest *[32]byte) error {
	if digest == nil {
		return errAdminDisabled
	}
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return errUnauthorized
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(token)))
	if subtle.ConstantTimeCompare(got[:], digest[:]) != 1 {
		return errUnauthorized
	}
	return nil
}

// CheckTokenFile reports whether path holds a usable token ("" is fine: the admin API is then
// disabled). `pollbal check` uses it so a config that `run` would refuse is not called ok.
func CheckTokenFile(path string) error {
	_, err := readToken(path)
	return err
}
