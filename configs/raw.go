package configs

import (
	"fmt"
	"net/netip"
	"reflect"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// field is one scalar exactly as the YAML wrote it. Decoding keeps the node so that the
// conversion can tell an absent key (or an explicit null) from an explicit zero, and can report
// a bad value with its path and line instead of yaml's Go type names.
type field struct {
	node *yaml.Node
}

// UnmarshalYAML keeps the node; yaml.v3 never calls it for a null, which therefore reads as
// absent.
func (f *field) UnmarshalYAML(n *yaml.Node) error {
	f.node = n
	return nil
}

func (f field) set() bool { return f.node != nil }

// rawConfigType is the raw mirror of Config that yaml.v3 decodes into (see rawType). It is
// built once from Config's declaration, so a key is declared in one place only.
var rawConfigType = rawType(reflect.TypeFor[Config]())

// rawType returns the mirror of a Config type t: the same keys (t's yaml tags) in the same
// order, every scalar a field, so that decoding cannot fail on a value and KnownFields(true)
// still rejects unknown keys. A mapping that may be left out (a pointer to a struct) stays a
// pointer, so that its absence shows.
func rawType(t reflect.Type) reflect.Type {
	if scalarConverter(t) != nil {
		return reflect.TypeFor[field]()
	}
	switch t.Kind() {
	case reflect.Struct:
		fields := make([]reflect.StructField, t.NumField())
		for i := range fields {
			f := t.Field(i)
			fields[i] = reflect.StructField{Name: f.Name, Type: rawType(f.Type), Tag: f.Tag}
		}
		return reflect.StructOf(fields)
	case reflect.Pointer:
		return reflect.PointerTo(rawType(t.Elem()))
	case reflect.Slice:
		return reflect.SliceOf(rawType(t.Elem()))
	case reflect.Map:
		return reflect.MapOf(t.Key(), rawType(t.Elem()))
	}
	panic(fmt.Sprintf("configs: no YAML conversion for %s", t))
}

// converter turns the raw mirror into typed values, recording a problem for each field that
// does not fit its type. A field that does not fit leaves the destination (its default)
// unchanged.
type converter struct {
	p *problemList
	// written holds the path of every scalar key that the YAML sets, for the defaults that
	// depend on another key's value.
	written map[string]bool
}

// scalar returns the field's node when it is a scalar; otherwise it records that the key wants
// the given kind of value and returns nil.
func (cv converter) scalar(f field, path, want string) *yaml.Node {
	if !f.set() {
		return nil
	}
	n := f.node
	if n.Kind != yaml.ScalarNode {
		cv.p.unusable(path, fmt.Errorf("must be %s, got %s (line %d)", want, describeNode(n), n.Line))
		return nil
	}
	return n
}

// scalarFunc converts the scalar a field holds onto dst, a settable value of the Config
// type that the scalar stands for.
type scalarFunc func(cv converter, f field, path string, dst reflect.Value)

// scalarConverter returns the converter for a Config type that a YAML scalar holds, or nil
// when t is not one.
func scalarConverter(t reflect.Type) scalarFunc {
	switch t {
	case reflect.TypeFor[string]():
		return read("a string", func(n *yaml.Node, _ string) (string, error) { return n.Value, nil })
	case reflect.TypeFor[int]():
		// yaml.v3 would truncate 1.5 into an int; only an !!int scalar is an integer here.
		return read("an integer", tagged[int]("!!int"))
	case reflect.TypeFor[float64]():
		return read("a number", parseNumber)
	case reflect.TypeFor[time.Duration]():
		return read("a duration", parseDuration)
	case reflect.TypeFor[bool]():
		return read("true or false", tagged[bool]("!!bool"))
	case reflect.TypeFor[*bool]():
		return read("true or false", func(n *yaml.Node, want string) (*bool, error) {
			v, err := tagged[bool]("!!bool")(n, want)
			return &v, err
		})
	case reflect.TypeFor[netip.Prefix]():
		// A trusted proxy's CIDR or single address; see ParseTrustedProxy.
		return read("a CIDR such as 10.0.0.0/8", parsePrefix)
	}
	return nil
}

// read returns the converter for a scalar type T: want names the kind of value the key takes,
// parse reads one from a scalar node. A value that is not a scalar, or that parse rejects, is
// recorded as unusable at the path and leaves dst unchanged.
func read[T any](want string, parse func(n *yaml.Node, want string) (T, error)) scalarFunc {
	return func(cv converter, f field, path string, dst reflect.Value) {
		n := cv.scalar(f, path, want)
		if n == nil {
			return
		}
		v, err := parse(n, want)
		if err != nil {
			cv.p.unusable(path, err)
			return
		}
		dst.Set(reflect.ValueOf(v))
	}
}

// tagged parses a scalar that YAML itself types as tag (such as !!int), which a value of
// the kind named by want must be.
func tagged[T any](tag string) func(n *yaml.Node, want string) (T, error) {
	return func(n *yaml.Node, want string) (T, error) {
		var v T
		if n.ShortTag() != tag || n.Decode(&v) != nil {
			return v, fmt.Errorf("must be %s, got %q (line %d)", want, n.Value, n.Line)
		}
		return v, nil
	}
}

// parseNumber reads a number written as an integer or a decimal (1, 0.25, .5).
func parseNumber(n *yaml.Node, want string) (float64, error) {
	var v float64
	if tag := n.ShortTag(); (tag != "!!int" && tag != "!!float") || n.Decode(&v) != nil {
		return 0, fmt.Errorf("must be %s, got %q (line %d)", want, n.Value, n.Line)
	}
	return v, nil
}

func parseDuration(n *yaml.Node, _ string) (time.Duration, error) {
	d, err := time.ParseDuration(n.Value)
	if err != nil {
		return 0, fmt.Errorf("%q is not a Go duration such as 500ms or 1m30s (line %d): %w", n.Value, n.Line, err)
	}
	return d, nil
}

func parsePrefix(n *yaml.Node, _ string) (netip.Prefix, error) {
	pfx, err := ParseTrustedProxy(n.Value)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%w (line %d)", err, n.Line)
	}
	return pfx, nil
}

// config converts the raw mirror (a value of rawConfigType) onto Default(); list elements,
// map values and the etcd store start from their own defaults (setElementDefaults). Keys that
// were written keep their value even when it is a zero, so that Validate rejects e.g. an
// explicit `capacity: 0` instead of it becoming 100.
func config(raw reflect.Value, p *problemList) *Config {
	cv := converter{p: p, written: map[string]bool{}}
	c := Default()
	cv.fill(reflect.ValueOf(c).Elem(), raw, "")

	// Host patterns match without regard to case; a left-out service or id takes its value
	// from the only service or the address.
	for i := range c.Apps {
		a := &c.Apps[i]
		for j, h := range a.Hosts {
			a.Hosts[j] = strings.ToLower(h)
		}
		if !cv.written[fmt.Sprintf("apps[%d].service", i)] && len(c.Services) == 1 {
			for name := range c.Services {
				a.Service = name
			}
		}
	}
	for i := range c.Backends {
		if b := &c.Backends[i]; !cv.written[fmt.Sprintf("backends[%d].id", i)] {
			b.ID = b.Address
		}
	}
	return c
}

// fill converts raw, the mirror of dst's type, onto dst at path. A key that is left out keeps
// dst's value there (its default).
func (cv converter) fill(dst, raw reflect.Value, path string) {
	if conv := scalarConverter(dst.Type()); conv != nil {
		f := raw.Interface().(field)
		if f.set() {
			cv.written[path] = true
		}
		conv(cv, f, path, dst)
		return
	}
	switch dst.Kind() {
	case reflect.Struct:
		for i := range dst.NumField() {
			key, _, _ := strings.Cut(dst.Type().Field(i).Tag.Get("yaml"), ",")
			cv.fill(dst.Field(i), raw.Field(i), joinPath(path, key))
		}
	case reflect.Pointer:
		if !raw.IsNil() {
			v := elementDefault(dst.Type().Elem())
			cv.fill(v, raw.Elem(), path)
			dst.Set(v.Addr())
		}
	case reflect.Slice:
		for i := range raw.Len() {
			v := elementDefault(dst.Type().Elem())
			cv.fill(v, raw.Index(i), fmt.Sprintf("%s[%d]", path, i))
			dst.Set(reflect.Append(dst, v))
		}
	case reflect.Map:
		if raw.IsNil() {
			return
		}
		dst.Set(reflect.MakeMapWithSize(dst.Type(), raw.Len()))
		for it := raw.MapRange(); it.Next(); {
			v := elementDefault(dst.Type().Elem())
			cv.fill(v, it.Value(), joinPath(path, it.Key().String()))
			dst.SetMapIndex(it.Key(), v)
		}
	}
}

// elementDefault returns a new, settable value of type t holding the defaults of a list
// element, map value or optional mapping of that type.
func elementDefault(t reflect.Type) reflect.Value {
	v := reflect.New(t).Elem()
	setElementDefaults(v.Addr().Interface())
	return v
}

// describeNode names a node's kind for messages: "a list", "a mapping", "a string".
func describeNode(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	case yaml.AliasNode:
		return "an alias"
	case yaml.DocumentNode:
		return "a document"
	}
	return describeTag(n.ShortTag())
}

// describeTag names a YAML tag for messages.
func describeTag(tag string) string {
	switch tag {
	case "!!str":
		return "a string"
	case "!!int":
		return "an integer"
	case "!!float":
		return "a number"
	case "!!bool":
		return "a boolean"
	case "!!null":
		return "null"
	case "!!seq":
		return "a list"
	case "!!map":
		return "a mapping"
	case "!!timestamp":
		return "a timestamp"
	case "!!binary":
		return "binary data"
	}
	return fmt.Sprintf("a %s value", tag)
}

// servicePath is the path of a service entry; a name that is not a plain token is quoted so
// that the path stays readable.
func servicePath(name string) string {
	if ValidServiceName(name) {
		return "services." + name
	}
	return fmt.Sprintf("services[%q]", name)
}
