package balancer

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"pollbal/configs"
	"pollbal/internal/configtest"
)

// A Snapshot holds no pointer back to the Balancer: walking every type a Snapshot can reach
// through this package's own struct types (fields, pointers, slices, arrays, maps, channels,
// and atomics through the type they hold) never arrives at Balancer, and no interface on the way
// could hold one. Other packages' structs (metrics) are not walked. Function values cannot be
// seen into: the walk lists the ones it meets, and the test fails on any but the queue's clock.
func TestSnapshotHasNoPathToTheBalancer(t *testing.T) {
	balancer := reflect.TypeFor[Balancer]()
	seen := map[reflect.Type]bool{}
	var funcs []string
	var walk func(t reflect.Type, path string) string
	walk = func(typ reflect.Type, path string) string {
		if typ == balancer {
			return path
		}
		if seen[typ] {
			return ""
		}
		seen[typ] = true
		switch typ.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Chan:
			return walk(typ.Elem(), path+"/"+typ.Kind().String())
		case reflect.Map:
			if p := walk(typ.Key(), path+"/key"); p != "" {
				return p
			}
			return walk(typ.Elem(), path+"/value")
		case reflect.Struct:
			if pkg := typ.PkgPath(); pkg != balancer.PkgPath() && pkg != "sync/atomic" {
				return ""
			}
			for i := range typ.NumField() {
				f := typ.Field(i)
				if f.Type.Kind() == reflect.Func {
					funcs = append(funcs, typ.Name()+"."+f.Name)
				}
				if p := walk(f.Type, path+"."+f.Name); p != "" {
					return p
				}
			}
		case reflect.Interface:
			if reflect.PointerTo(balancer).Implements(typ) || balancer.Implements(typ) {
				return path + " (an interface a *Balancer satisfies)"
			}
		}
		return ""
	}
	if p := walk(reflect.TypeFor[Snapshot](), "Snapshot"); p != "" {
		t.Fatalf("a Snapshot reaches the Balancer through %s", p)
	}
	// The walk went where the live state is: it is not vacuous.
	for _, want := range []reflect.Type{reflect.TypeFor[slot](), reflect.TypeFor[candCell](), reflect.TypeFor[waitQueues](), reflect.TypeFor[Backend](), reflect.TypeFor[appCounters]()} {
		if !seen[want] {
			t.Errorf("the walk never reached %v", want)
		}
	}
	for _, f := range funcs {
		if f != "waitQueues.now" {
			t.Errorf("a Snapshot reaches a function value at %s, which the walk cannot see into", f)
		}
	}
	if len(funcs) == 0 {
		t.Error("the walk met no function value: the queue's clock moved; update the test")
	}
}

// A health change swaps candidate sets in the lists' cells and touches nothing of the snapshot:
// the same snapshot stays published, and its own fields, those of its apps, members and lists
// hold the same values (pointers, lengths) as before.
func TestHealthChangeLeavesTheSnapshotAlone(t *testing.T) {
	cfg := configtest.New([]configs.App{{Name: "www", Hosts: []string{"*"}}, {Name: "shop", Hosts: []string{"shop.test"}, Owner: "acme"}},
		[]configs.Backend{{ID: "a1", Owner: "acme"}, {ID: "d1"}, {ID: "d2"}})
	b := newTestBalancer(t, cfg, nil)
	markReady(b, []string{"d1"})
	s := b.Snapshot()
	before := shallow(s)
	sets := map[*candList]*candSet{}
	for _, l := range s.lists {
		sets[l] = l.current()
	}
	markReady(b, []string{"a1", "d2"})
	if b.Snapshot() != s {
		t.Fatal("a health change published a new snapshot: the test no longer looks at regroup")
	}
	swapped := 0
	for l, set := range sets {
		if l.current() != set {
			swapped++
		}
	}
	if swapped == 0 {
		t.Fatal("no candidate set was swapped: the health change was not visible")
	}
	if after := shallow(s); !reflect.DeepEqual(after, before) {
		t.Fatalf("a health change wrote the snapshot:\nbefore %v\nafter  %v", before, after)
	}
}

// shallow lists the values of the fields of s, its members, apps and lists, with pointers,
// maps, slices and functions as their address (and length): what a write to any of those
// structs would change, without following pointers into the cells they reference.
func shallow(s *Snapshot) []string {
	var out []string
	add := func(v reflect.Value) {
		for i := range v.NumField() {
			out = append(out, v.Type().Field(i).Name+"="+flat(v.Field(i)))
		}
	}
	add(reflect.ValueOf(s).Elem())
	for _, m := range s.members {
		add(reflect.ValueOf(m).Elem())
	}
	for _, a := range s.apps {
		add(reflect.ValueOf(a).Elem())
	}
	for _, k := range slices.SortedFunc(maps.Keys(s.lists), func(a, b [2]string) int { return strings.Compare(a[0]+"/"+a[1], b[0]+"/"+b[1]) }) {
		add(reflect.ValueOf(s.lists[k]).Elem())
	}
	return out
}

func flat(v reflect.Value) string {
	switch v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Chan, reflect.Func, reflect.UnsafePointer:
		return fmt.Sprintf("%#x", v.Pointer())
	case reflect.Slice:
		return fmt.Sprintf("%#x[%d]", v.Pointer(), v.Len())
	case reflect.Struct:
		var parts []string
		for i := range v.NumField() {
			parts = append(parts, flat(v.Field(i)))
		}
		return "{" + strings.Join(parts, " ") + "}"
	case reflect.Array:
		var parts []string
		for i := range v.Len() {
			parts = append(parts, flat(v.Index(i)))
		}
		return "[" + strings.Join(parts, " ") + "]"
	case reflect.Interface:
		if v.IsNil() {
			return "nil"
		}
		return flat(v.Elem())
	case reflect.String:
		return strconv.Quote(v.String())
	case reflect.Bool:
		return strconv.FormatBool(v.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(v.Int(), 10)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return strconv.FormatUint(v.Uint(), 10)
	}
	panic("shallow: a field of kind " + v.Kind().String())
}
