package balancer

import (
	"testing"

	"pollbal/configs"
	"pollbal/internal/configtest"
)

func TestRoute(t *testing.T) {
	cfg := configtest.New([]configs.App{
		{Name: "exact", Hosts: []string{"shop.example.com"}},
		{Name: "wild", Hosts: []string{"*.shop.example.com"}},
		{Name: "deep", Hosts: []string{"*.eu.shop.example.com"}},
		{Name: "star", Hosts: []string{"*"}},
	}, []configs.Backend{{ID: "b1"}})
	s := newTestBalancer(t, cfg, nil).Snapshot()
	cases := []struct {
		name, host, want string
	}{
		{name: "exact match", host: "shop.example.com", want: "exact"},
		{name: "port is ignored", host: "shop.example.com:8080", want: "exact"},
		{name: "case is ignored", host: "SHOP.Example.COM", want: "exact"},
		{name: "trailing dot", host: "shop.example.com.", want: "exact"},
		{name: "wildcard one label", host: "a.shop.example.com", want: "wild"},
		{name: "wildcard several labels", host: "a.b.shop.example.com", want: "wild"},
		{name: "longest wildcard wins", host: "x.eu.shop.example.com", want: "deep"},
		{name: "wildcard does not match its bare suffix", host: "eu.shop.example.com", want: "wild"},
		{name: "unknown host goes to star", host: "other.test", want: "star"},
		{name: "empty host goes to star", host: "", want: "star"},
		{name: "ipv6 literal with port", host: "[::1]:80", want: "star"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := s.Route([]byte(tc.host))
			if a == nil || a.Name != tc.want {
				t.Fatalf("Route(%q) = %v, want %s", tc.host, a, tc.want)
			}
		})
	}
}

func TestRouteNoMatch(t *testing.T) {
	cfg := configtest.New([]configs.App{{Name: "exact", Hosts: []string{"shop.example.com"}}}, []configs.Backend{{ID: "b1"}})
	s := newTestBalancer(t, cfg, nil).Snapshot()
	if a := s.Route([]byte("example.com")); a != nil {
		t.Fatalf("Route matched %s, want no app", a.Name)
	}
}
