package main

import (
	"testing"

	"pollbal/configs"
)

func TestFilesNeeded(t *testing.T) {
	tests := []struct {
		name       string
		maxConns   int
		adminConns int
		backends   int
		want       uint64
	}{
		{name: "defaults, no backend", maxConns: 10000, adminConns: 256, want: 10320},
		{name: "two descriptors per backend", maxConns: 10000, adminConns: 256, backends: 50, want: 10420},
		{name: "admin connections count", maxConns: 10000, adminConns: 1000, want: 11064},
		{name: "small", maxConns: 1, adminConns: 1, backends: 1, want: 68},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := &configs.Config{Proxy: configs.Proxy{MaxConnections: tt.maxConns}, Admin: configs.Admin{MaxConnections: tt.adminConns},
				Backends: make([]configs.Backend, tt.backends)}
			if got := filesNeeded(cfg); got != tt.want {
				t.Errorf("filesNeeded = %d, want %d", got, tt.want)
			}
		})
	}
}
