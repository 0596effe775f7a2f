package fleet

import (
	"reflect"
	"testing"

	"pollbal/configs"
)

func TestExampleConfigsLoad(t *testing.T) {
	a, err := configs.Load("a.yaml")
	if err != nil {
		t.Fatalf("a.yaml: %v", err)
	}
	b, err := configs.Load("b.yaml")
	if err != nil {
		t.Fatalf("b.yaml: %v", err)
	}
	if a.Site == b.Site || a.Listen == b.Listen || a.Admin.Listen == b.Admin.Listen || a.Admin.StateFile == b.Admin.StateFile {
		t.Fatal("the two instances must differ in site, listeners and state file")
	}
	if a.Admin.Store.Etcd == nil || !reflect.DeepEqual(a.Admin.Store, b.Admin.Store) {
		t.Fatalf("both instances must use the same etcd store: %+v vs %+v", a.Admin.Store.Etcd, b.Admin.Store.Etcd)
	}
	if !reflect.DeepEqual(a.Backends, b.Backends) {
		t.Fatal("both instances must front the same backends")
	}
}
