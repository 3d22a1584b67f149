package config

import (
	"encoding"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

var (
	typeOfDuration = reflect.TypeOf(time.Duration(0))
	typeOfUnmarsh  = reflect.TypeOf((*yaml.Unmarshaler)(nil)).Elem()
	typeOfTextUn   = reflect.TypeOf((*encoding.TextUnmarshaler)(nil)).Elem()
)

// yamlFields returns the yaml keys of a struct type (inline structs flattened).
func yamlFields(t reflect.Type) map[string]reflect.StructField {
	out := map[string]reflect.StructField{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if strings.Contains(opts, "inline") {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range yamlFields(ft) {
					out[k] = v
				}
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out[name] = f
	}
	return out
}

func custom(t reflect.Type) bool {
	return t.Implements(typeOfUnmarsh) || reflect.PointerTo(t).Implements(typeOfUnmarsh) ||
		t.Implements(typeOfTextUn) || reflect.PointerTo(t).Implements(typeOfTextUn)
}

// checkKnown walks a YAML node against a Go type and reports the first key
// that the type does not have, with its full path and line.
func checkKnown(n *yaml.Node, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if custom(t) {
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
				return nil
			}
			return &Error{Key: orRoot(path), Reason: fmt.Sprintf("line %d: must be a mapping", n.Line)}
		}
		fields := yamlFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			f, ok := fields[k.Value]
			if !ok {
				return &Error{Key: join(path, k.Value), Reason: fmt.Sprintf("unknown key (line %d)", k.Line)}
			}
			if err := checkKnown(n.Content[i+1], f.Type, join(path, k.Value)); err != nil {
				return err
			}
		}
	case reflect.Map:
		if n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				if err := checkKnown(n.Content[i+1], t.Elem(), join(path, n.Content[i].Value)); err != nil {
					return err
				}
			}
		}
	case reflect.Slice, reflect.Array:
		if n.Kind == yaml.SequenceNode {
			for i, c := range n.Content {
				if err := checkKnown(c, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func orRoot(p string) string {
	if p == "" {
		return "(root)"
	}
	return p
}

// Leaf is one settable scalar key of the configuration.
type Leaf struct {
	// Path is the dotted key path, e.g. "server.grpc_addr".
	Path string
	// Env is the environment variable overriding it, e.g. TOOLPLANE_SERVER_GRPC_ADDR.
	Env string
	// Value is the field.
	Value reflect.Value
}

// Leaves lists every scalar (or string-list) key of a document reachable
// without crossing a slice of structs or a map, in a stable order (by key
// path). It panics when the document's registration is broken (see Load).
func Leaves(doc Document) []Leaf {
	var out []Leaf
	var walk func(v reflect.Value, path string)
	walk = func(v reflect.Value, path string) {
		t := v.Type()
		if t.Kind() == reflect.Struct && !custom(t) {
			fields := yamlFields(t)
			keys := make([]string, 0, len(fields))
			for k := range fields {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				fv := v.FieldByIndex(fields[k].Index)
				walk(fv, join(path, k))
			}
			return
		}
		if t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Struct {
			return
		}
		if t.Kind() == reflect.Map || (t.Kind() == reflect.Slice && t.Elem().Kind() != reflect.String) {
			return
		}
		out = append(out, Leaf{Path: path, Env: "TOOLPLANE_" + strings.ToUpper(strings.NewReplacer(".", "_", "-", "_").Replace(path)), Value: v})
	}
	for _, e := range sortedByKey(mustEntries(doc)) {
		walk(reflect.ValueOf(e.ptr).Elem(), e.key)
	}
	return out
}

// applyEnv sets keys from TOOLPLANE_<SECTION>_<KEY> variables. Variables
// that name no key are ignored (TOOLPLANE_TOKEN is the CLI's, for example).
func applyEnv(doc Document, environ []string) error {
	byEnv := map[string]Leaf{}
	for _, l := range Leaves(doc) {
		byEnv[l.Env] = l
	}
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(k, "TOOLPLANE_") {
			continue
		}
		l, ok := byEnv[k]
		if !ok {
			continue
		}
		if err := setValue(l.Value, v); err != nil {
			return &Error{Key: k, Reason: err.Error()}
		}
	}
	return nil
}

// SetPath sets one scalar key of a document by its dotted path, parsing
// value as the environment's variables are parsed.
func SetPath(doc Document, path, value string) error {
	for _, l := range Leaves(doc) {
		if l.Path == path {
			return setValue(l.Value, value)
		}
	}
	return fmt.Errorf("no configuration key %s", path)
}

func setValue(v reflect.Value, s string) error {
	if v.Type() == typeOfDuration {
		d, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("invalid duration %q", s)
		}
		v.SetInt(int64(d))
		return nil
	}
	if v.CanAddr() && v.Addr().Type().Implements(typeOfTextUn) {
		return v.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(s))
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return fmt.Errorf("invalid boolean %q", s)
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return fmt.Errorf("invalid integer %q", s)
		}
		v.SetInt(n)
	case reflect.Float64, reflect.Float32:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return fmt.Errorf("invalid number %q", s)
		}
		v.SetFloat(f)
	case reflect.Slice:
		v.Set(reflect.ValueOf(splitList(s)))
	case reflect.Pointer:
		nv := reflect.New(v.Type().Elem())
		if err := setValue(nv.Elem(), s); err != nil {
			return err
		}
		v.Set(nv)
	default:
		return fmt.Errorf("cannot be set from text")
	}
	return nil
}
