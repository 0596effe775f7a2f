package store

import (
	"errors"
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name, id, pool string
		want           error
		wantMsg        string
	}{
		{name: "name id, pool", id: "web-1", pool: "pool-acme"},
		{name: "reserved pool", id: "web-1", pool: "unassigned"},
		{name: "address as id (the default id)", id: "127.0.0.1:9001", pool: "canary"},
		{name: "IPv6 address as id", id: "[::1]:9001", pool: "canary"},
		{name: "empty id", id: "", pool: "canary", want: ErrInvalidBackendID, wantMsg: `invalid backend id ""`},
		{name: "id with a slash", id: "a/b", pool: "canary", want: ErrInvalidBackendID},
		{name: "id with a space", id: "web 1", pool: "canary", want: ErrInvalidBackendID},
		{name: "host without a port", id: "10.0.0.1:", pool: "canary", want: ErrInvalidBackendID},
		{name: "upper-case pool", id: "web-1", pool: "Not A Pool", want: ErrInvalidPool,
			wantMsg: `invalid pool name "Not A Pool": want [a-z0-9][a-z0-9_.-]{0,62}`},
		{name: "empty pool", id: "web-1", pool: "", want: ErrInvalidPool},
		{name: "longest pool", id: "web-1", pool: strings.Repeat("a", 63)},
		{name: "pool too long", id: "web-1", pool: strings.Repeat("a", 64), want: ErrInvalidPool},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Validate(tt.id, tt.pool)
			if !errors.Is(err, tt.want) || (tt.want == nil && err != nil) {
				t.Fatalf("Validate(%q, %q) = %v, want %v", tt.id, tt.pool, err, tt.want)
			}
			if tt.wantMsg != "" && err.Error() != tt.wantMsg {
				t.Errorf("message %q, want %q", err.Error(), tt.wantMsg)
			}
		})
	}
}
