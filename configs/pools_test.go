package configs

import (
	"strings"
	"testing"
)

func TestBackendPool(t *testing.T) {
	tests := []struct {
		name       string
		b          Backend
		wantPool   string
		wantSource string
	}{
		{name: "neither pool nor owner", b: Backend{ID: "a"}, wantPool: "default", wantSource: "default"},
		{name: "owner", b: Backend{Owner: "acme"}, wantPool: "pool-acme", wantSource: "owner"},
		{name: "explicit pool", b: Backend{Pool: "canary"}, wantPool: "canary", wantSource: "config"},
		{name: "explicit pool beats owner", b: Backend{Pool: "canary", Owner: "acme"}, wantPool: "canary", wantSource: "config"},
		{name: "explicit unassigned", b: Backend{Pool: PoolUnassigned, Owner: "acme"}, wantPool: "unassigned", wantSource: "config"},
		{name: "explicit default", b: Backend{Pool: PoolDefault}, wantPool: "default", wantSource: "config"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pool, source := BackendPool(tt.b)
			if pool != tt.wantPool || source != tt.wantSource {
				t.Errorf("BackendPool = (%q, %q), want (%q, %q)", pool, source, tt.wantPool, tt.wantSource)
			}
		})
	}
}

func TestAppPool(t *testing.T) {
	tests := []struct {
		name           string
		a              App
		wantPool       string
		wantResolution string
		wantFallback   bool
	}{
		{name: "explicit pool, fallback unset", a: App{Pool: "pool-acme"},
			wantPool: "pool-acme", wantResolution: "explicit", wantFallback: false},
		{name: "explicit pool, fallback allowed", a: App{Pool: "pool-acme", AllowFallbackToDefault: boolPtr(true)},
			wantPool: "pool-acme", wantResolution: "explicit", wantFallback: true},
		{name: "explicit pool, fallback forbidden", a: App{Pool: "pool-acme", AllowFallbackToDefault: boolPtr(false)},
			wantPool: "pool-acme", wantResolution: "explicit", wantFallback: false},
		{name: "explicit pool beats owner", a: App{Pool: "canary", Owner: "acme"},
			wantPool: "canary", wantResolution: "explicit", wantFallback: false},
		{name: "owner, fallback unset", a: App{Owner: "acme"},
			wantPool: "pool-acme", wantResolution: "owner", wantFallback: true},
		{name: "owner, fallback forbidden", a: App{Owner: "acme", AllowFallbackToDefault: boolPtr(false)},
			wantPool: "pool-acme", wantResolution: "owner", wantFallback: false},
		{name: "owner, fallback allowed", a: App{Owner: "acme", AllowFallbackToDefault: boolPtr(true)},
			wantPool: "pool-acme", wantResolution: "owner", wantFallback: true},
		{name: "neither", a: App{},
			wantPool: "default", wantResolution: "default", wantFallback: false},
		{name: "neither, fallback allowed has nothing to fall back to", a: App{AllowFallbackToDefault: boolPtr(true)},
			wantPool: "default", wantResolution: "default", wantFallback: false},
		{name: "explicit default pool never falls back", a: App{Pool: PoolDefault, AllowFallbackToDefault: boolPtr(true)},
			wantPool: "default", wantResolution: "explicit", wantFallback: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pool, resolution, fallback := AppPool(tt.a)
			if pool != tt.wantPool || resolution != tt.wantResolution || fallback != tt.wantFallback {
				t.Errorf("AppPool = (%q, %q, %v), want (%q, %q, %v)",
					pool, resolution, fallback, tt.wantPool, tt.wantResolution, tt.wantFallback)
			}
		})
	}
}

func TestValidPoolName(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want bool
	}{
		{name: "simple", in: "canary", want: true},
		{name: "owner pool", in: "pool-acme", want: true},
		{name: "reserved default", in: "default", want: true},
		{name: "reserved unassigned", in: "unassigned", want: true},
		{name: "digits and punctuation", in: "0a_b.c-d", want: true},
		{name: "single character", in: "a", want: true},
		{name: "63 characters", in: strings.Repeat("a", 63), want: true},
		{name: "64 characters", in: strings.Repeat("a", 64), want: false},
		{name: "empty", in: "", want: false},
		{name: "upper case", in: "Canary", want: false},
		{name: "leading dash", in: "-canary", want: false},
		{name: "leading dot", in: ".canary", want: false},
		{name: "space", in: "can ary", want: false},
		{name: "slash", in: "pool/acme", want: false},
		{name: "trailing newline", in: "canary\n", want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ValidPoolName(tt.in); got != tt.want {
				t.Errorf("ValidPoolName(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

func TestValidServiceName(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want bool
	}{
		{name: "lower case", in: "web", want: true},
		{name: "mixed case and punctuation", in: "Web_2.api-x", want: true},
		{name: "64 characters", in: strings.Repeat("A", 64), want: true},
		{name: "65 characters", in: strings.Repeat("A", 65), want: false},
		{name: "empty", in: "", want: false},
		{name: "leading underscore", in: "_web", want: false},
		{name: "colon", in: "web:1", want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ValidServiceName(tt.in); got != tt.want {
				t.Errorf("ValidServiceName(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}
