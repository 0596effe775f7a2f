package configs

import (
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestShippedFilesAreValid(t *testing.T) {
	files := Shipped()
	for _, name := range []string{"pollbal.yaml", "demo.yaml"} {
		if _, ok := files[name]; !ok {
			t.Errorf("%s is not shipped", name)
		}
	}
	for name, data := range files {
		t.Run(name, func(t *testing.T) {
			c, err := Parse(data)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if err := c.Validate(); err != nil {
				t.Errorf("%s revalidated: %v", name, err)
			}
		})
	}
}

func TestShippedReturnsCopies(t *testing.T) {
	first := Shipped()
	first["pollbal.yaml"][0] = 'X'
	delete(first, "demo.yaml")
	second := Shipped()
	if second["pollbal.yaml"][0] == 'X' {
		t.Error("Shipped shares its bytes between calls")
	}
	if _, ok := second["demo.yaml"]; !ok {
		t.Error("Shipped shares its map between calls")
	}
}

// TestReferenceNamesEveryKey keeps pollbal.yaml a complete reference: every yaml key of the
// schema must appear in it, written as a key (or as a commented-out key).
func TestReferenceNamesEveryKey(t *testing.T) {
	ref := string(Shipped()["pollbal.yaml"])
	for _, key := range yamlKeys(reflect.TypeFor[Config]()) {
		t.Run(key, func(t *testing.T) {
			re := regexp.MustCompile(`(?m)^[ \t]*(#[ \t]*)?(- )?` + regexp.QuoteMeta(key) + `:`)
			if !re.MatchString(ref) {
				t.Errorf("pollbal.yaml does not document %q", key)
			}
		})
	}
}

// yamlKeys lists the yaml tag names of t's fields and of the structs it holds.
func yamlKeys(t reflect.Type) []string {
	var keys []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			continue
		}
		keys = append(keys, name)
		ft := f.Type
		for ft.Kind() == reflect.Slice || ft.Kind() == reflect.Map || ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct && ft.PkgPath() == t.PkgPath() {
			keys = append(keys, yamlKeys(ft)...)
		}
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

func TestDemoConfig(t *testing.T) {
	c, err := Parse(Shipped()["demo.yaml"])
	if err != nil {
		t.Fatal(err)
	}
	type backendView struct{ ID, Address, Pool string }
	var backends []backendView
	for _, b := range c.Backends {
		pool, _ := BackendPool(b)
		if b.Capacity != 32 {
			t.Errorf("%s capacity = %d, want 32", b.ID, b.Capacity)
		}
		backends = append(backends, backendView{b.ID, b.Address, pool})
	}
	type appView struct {
		Name     string
		Hosts    []string
		Service  string
		Pool     string
		Fallback bool
	}
	var apps []appView
	for _, a := range c.Apps {
		pool, _, fallback := AppPool(a)
		apps = append(apps, appView{a.Name, a.Hosts, a.Service, pool, fallback})
	}
	tests := []fieldCase{
		{name: "site", got: c.Site, want: "demo"},
		{name: "listen", got: c.Listen, want: "127.0.0.1:18080"},
		{name: "admin.listen", got: c.Admin.Listen, want: "127.0.0.1:19090"},
		{name: "poll", got: [3]time.Duration{c.Poll.Interval, c.Poll.Timeout, c.Poll.MaxBackoff},
			want: [3]time.Duration{500 * time.Millisecond, 400 * time.Millisecond, 2 * time.Second}},
		{name: "services", got: c.Services, want: map[string]Service{"web": {WarningThreshold: 1, WarningScope: ScopeService}}},
		{name: "backends", got: backends, want: []backendView{
			{"web-1", "127.0.0.1:19101", "pool-acme"},
			{"web-2", "127.0.0.1:19102", "pool-acme"},
			{"web-3", "127.0.0.1:19103", "default"},
			{"web-4", "127.0.0.1:19104", "default"},
		}},
		{name: "apps", got: apps, want: []appView{
			{"shop", []string{"shop.localhost"}, "web", "pool-acme", false},
			{"www", []string{"*"}, "web", "default", false},
		}},
	}
	checkFields(t, tests)
}
