package config

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"sort"
)

// Section is one top-level key of toolplane.yaml owned by a component. The
// component's package defines the section's type (a struct with yaml tags
// whose doc comments document each key and its default), its defaults and
// its validation; the composition root registers it (Document.Sections).
// The loader decodes the section's YAML subtree into it (unknown keys are
// errors naming their path and line), sets its scalar keys from
// TOOLPLANE_<KEY>_<PATH> variables, then calls SetDefaults and Validate
// (docs/decisions/0020-config-sections.md).
//
// A section type implements Section with pointer receivers. It needs no
// import of this package: the interface is satisfied structurally.
type Section interface {
	// SectionKey is the top-level key ("catalog"), the first element of
	// every key path of the section and of its variables' names. Lowercase
	// letters, digits and underscores, starting with a letter.
	SectionKey() string
	// SetDefaults fills the unset fields with their defaults.
	SetDefaults()
	// Validate checks the section on its own, without touching the network
	// or the file system. An error is an *Error, or names the key path and
	// the reason ("catalog.reload_interval: must be >= 50ms"); any other
	// error is reported against the section key.
	Validate() error
}

// ProcessValidator is implemented by a section whose validity depends on
// the services its process serves (server.services); for example a runtime
// without a local catalog needs runtime.upstreams.catalog.address. It runs
// after every section's Validate; its errors are reported like Validate's.
type ProcessValidator interface {
	// ValidateProcess checks the section; serves reports whether this
	// process serves the named service.
	ValidateProcess(serves func(service string) bool) error
}

// Document is a whole toolplane.yaml as a composition root assembles it: a
// struct that embeds Base (the sections this package owns: server, auth)
// and holds one field per registered section. internal/app.Config is the
// binary's.
type Document interface {
	// Sections returns pointers to the registered sections, in file,
	// defaulting and validation order. Their keys are distinct and differ
	// from the base's.
	Sections() []Section
	// Services names the services a process can serve, in start order:
	// the default and the allowed values of server.services.
	Services() []string

	base() *Base // promoted from the embedded Base
}

// entry is one top-level key of a document.
type entry struct {
	key string
	// ptr is a non-nil pointer to the section's struct.
	ptr any
	// section is the registered section; nil for the base's own.
	section Section
}

var sectionKeyRE = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// entries lists a document's top-level keys, the base's first, and checks
// the registration: well-formed keys, none twice, each a non-nil pointer to
// a struct, distinct service names. A failure is a programming error of the
// composition root, not of the file, so it is a plain error.
func entries(doc Document) ([]entry, error) {
	b := doc.base()
	if b == nil {
		return nil, fmt.Errorf("config: %T has no Base", doc)
	}
	out := b.entries()
	seen := map[string]string{}
	for _, e := range out {
		seen[e.key] = "the base (internal/config)"
	}
	for _, s := range doc.Sections() {
		if s == nil {
			return nil, fmt.Errorf("config: %T registers a nil section", doc)
		}
		k := s.SectionKey()
		if !sectionKeyRE.MatchString(k) {
			return nil, fmt.Errorf("config: section %T has the malformed key %q", s, k)
		}
		if by, dup := seen[k]; dup {
			return nil, fmt.Errorf("config: section key %q of %T is already registered by %s", k, s, by)
		}
		v := reflect.ValueOf(s)
		if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
			return nil, fmt.Errorf("config: section %q must be a non-nil pointer to a struct, got %T", k, s)
		}
		seen[k] = fmt.Sprintf("%T", s)
		out = append(out, entry{key: k, ptr: s, section: s})
	}
	svcs := doc.Services()
	for i, name := range svcs {
		if name == "" || slices.Contains(svcs[:i], name) {
			return nil, fmt.Errorf("config: %T: service names must be non-empty and distinct, got %q", doc, svcs)
		}
	}
	return out, nil
}

// mustEntries is entries for the functions without an error result.
func mustEntries(doc Document) []entry {
	es, err := entries(doc)
	if err != nil {
		panic(err)
	}
	return es
}

// value is a struct holding one pointer field per entry, tagged with its
// key: decoding, encoding and walking it is decoding, encoding and walking
// the whole file, with the sections' own types below the top level.
func value(es []entry) reflect.Value {
	fields := make([]reflect.StructField, len(es))
	for i, e := range es {
		fields[i] = reflect.StructField{
			Name: fmt.Sprintf("S%d", i),
			Type: reflect.TypeOf(e.ptr),
			Tag:  reflect.StructTag(fmt.Sprintf("yaml:%q", e.key)),
		}
	}
	v := reflect.New(reflect.StructOf(fields))
	for i, e := range es {
		v.Elem().Field(i).Set(reflect.ValueOf(e.ptr))
	}
	return v
}

// sortedByKey returns the entries in key order (the order of Leaves).
func sortedByKey(es []entry) []entry {
	out := slices.Clone(es)
	sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	return out
}
