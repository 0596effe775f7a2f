package configtest

import (
	"reflect"
	"testing"
	"time"

	"pollbal/configs"
)

func TestNew(t *testing.T) {
	apps := []configs.App{{Name: "shop", Hosts: []string{"*"}}, {Name: "api", Hosts: []string{"api"}, Service: "api"}}
	backends := []configs.Backend{{ID: "a"}, {ID: "b", Address: "127.0.0.1:1", Capacity: 3}}
	cfg := New(apps, backends, Site("eu"), Service("api", configs.Service{}), WarningThreshold(2), Queue(time.Second, 5))

	def := configs.Default()
	tests := []struct {
		name      string
		got, want any
	}{
		{name: "defaults kept", got: cfg.Poll, want: def.Poll},
		{name: "site", got: cfg.Site, want: "eu"},
		{name: "app without service gets web", got: cfg.Apps[0].Service, want: "web"},
		{name: "app service kept", got: cfg.Apps[1].Service, want: "api"},
		{name: "backend without capacity", got: cfg.Backends[0].Capacity, want: Capacity},
		{name: "backend without address", got: cfg.Backends[0].Address, want: "127.0.0.1:10000"},
		{name: "backend given kept", got: cfg.Backends[1], want: backends[1]},
		{name: "threshold on every service", got: cfg.Services, want: map[string]configs.Service{
			"web": {WarningThreshold: 2, WarningScope: configs.ScopeVersion}, "api": {WarningThreshold: 2}}},
		{name: "queue", got: [2]any{cfg.Proxy.QueueTimeout, cfg.Proxy.MaxQueue}, want: [2]any{time.Second, 5}},
		{name: "arguments not changed", got: apps[0].Service + backends[0].Address, want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !reflect.DeepEqual(tt.got, tt.want) {
				t.Errorf("got %#v, want %#v", tt.got, tt.want)
			}
		})
	}
	if other := New(nil, nil); other.Site != "test" || len(other.Services) != 1 || other == cfg {
		t.Errorf("a second New: site %q, services %v: not a fresh default", other.Site, other.Services)
	}
}
