package twosite

import (
	"testing"

	"pollbal/configs"
)

func TestExampleConfigsLoad(t *testing.T) {
	sites := map[string]*configs.Config{}
	for _, name := range []string{"eu", "us"} {
		cfg, err := configs.Load(name + ".yaml")
		if err != nil {
			t.Fatalf("%s.yaml: %v", name, err)
		}
		sites[name] = cfg
	}
	eu, us := sites["eu"], sites["us"]
	if eu.Site == us.Site || eu.Listen == us.Listen || eu.Admin.Listen == us.Admin.Listen || eu.Admin.StateFile == us.Admin.StateFile {
		t.Fatal("the two sites must differ in site, listeners and state file")
	}
	if len(eu.Backends) != len(us.Backends) {
		t.Fatal("both sites must front the same backends")
	}
	for i := range eu.Backends {
		if eu.Backends[i] != us.Backends[i] {
			t.Fatalf("backend %d differs between sites: %+v vs %+v", i, eu.Backends[i], us.Backends[i])
		}
	}
}
