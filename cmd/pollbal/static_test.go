package main

import (
	"slices"
	"testing"

	"pollbal/configs"
)

// Issue 14: a reload rejected for two restart-only changes returned both in one `problems` item
// with no separator; each change is its own problem now.
func TestCheckStaticOneProblemPerChange(t *testing.T) {
	running := &configs.Config{Site: "eu", Listen: "127.0.0.1:8080", Admin: configs.Admin{Listen: "127.0.0.1:9090"}}
	tests := []struct {
		name string
		next configs.Config
		want []string
	}{
		{name: "nothing restart-only changed", next: *running},
		{name: "one change", next: configs.Config{Site: "us", Listen: "127.0.0.1:8080", Admin: configs.Admin{Listen: "127.0.0.1:9090"}},
			want: []string{"site: changing eu to us needs a restart"}},
		{name: "three changes, three problems",
			next: configs.Config{Site: "us", Listen: "127.0.0.1:8081", Admin: configs.Admin{Listen: "127.0.0.1:9091"}},
			want: []string{
				"listen: changing 127.0.0.1:8080 to 127.0.0.1:8081 needs a restart",
				"admin.listen: changing 127.0.0.1:9090 to 127.0.0.1:9091 needs a restart",
				"site: changing eu to us needs a restart",
			}},
		{name: "a store added",
			next: configs.Config{Site: "eu", Listen: "127.0.0.1:8080", Admin: configs.Admin{Listen: "127.0.0.1:9090",
				Store: configs.Store{Etcd: &configs.Etcd{Endpoints: []string{"127.0.0.1:2379"}, Prefix: "/p/"}}}},
			want: []string{"admin.store: changing the store of moves needs a restart"}},
		{name: "http2 changed",
			next: configs.Config{Site: "eu", Listen: "127.0.0.1:8080", Admin: configs.Admin{Listen: "127.0.0.1:9090"},
				HTTP2: configs.HTTP2{H2C: true}},
			want: []string{"http2: changing it needs a restart"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &server{cfg: running}
			next := tt.next
			err := s.checkStatic(&next)
			if got := configs.Problems(err); !slices.Equal(got, tt.want) {
				t.Fatalf("problems:\n  got  %q\n  want %q", got, tt.want)
			}
		})
	}
}
