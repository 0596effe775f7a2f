package main

import (
	"testing"

	"pollbal/configs"
)

func TestFilesNeeded(t *testing.T) {
	tests := []struct {
		name     string
		maxConns int
		backends int
		want     uint64
	}{
		{name: "defaults, no backend", maxConns: 10000, want: 10064},
		{name: "two descriptors per backend", maxConns: 10000, backends: 50, want: 10164},
		{name: "small", maxConns: 1, backends: 1, want: 67},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := &configs.Config{Proxy: configs.Proxy{MaxConnections: tt.maxConns}, Backends: make([]configs.Backend, tt.backends)}
			if got := filesNeeded(cfg); got != tt.want {
				t.Errorf("filesNeeded = %d, want %d", got, tt.want)
			}
		})
	}
}
