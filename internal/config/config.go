// Package config loads toolplane.yaml with the precedence flags >
// environment (TOOLPLANE_<SECTION>_<KEY>) > file > defaults, rejects
// unknown keys with their path and line, and validates everything before
// anything listens (docs/architecture.md §4).
//
// The loader owns the server and auth sections (Base); every other section
// is defined, defaulted, validated and documented by the package that owns
// it and reaches the loader only as a Section, registered by a composition
// root's Document (internal/app.Config; docs/decisions/0020-config-sections.md).
// This package imports no service.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Error is a configuration error naming the key (or flag) and the reason; the
// binary prints it on one line and exits 2.
type Error struct {
	// Key is the key path ("server.grpc_addr") or flag ("--grpc-addr").
	Key string
	// Reason says what is wrong.
	Reason string
}

func (e *Error) Error() string { return fmt.Sprintf("config: %s: %s", e.Key, e.Reason) }

func errf(key, format string, args ...any) error {
	return &Error{Key: key, Reason: fmt.Sprintf(format, args...)}
}

// SetDefaults fills the unset fields of every section with their defaults:
// the base's, then the registered sections' in order.
func SetDefaults(doc Document) {
	doc.base().setDefaults(doc.Services())
	for _, s := range doc.Sections() {
		s.SetDefaults()
	}
}

// Validate checks the whole document; the first problem is returned as an
// *Error. Order: the base sections, each registered section's Validate, then
// each ProcessValidator. It does not touch the network or the file system.
func Validate(doc Document) error {
	if _, err := entries(doc); err != nil {
		return err
	}
	b := doc.base()
	if err := b.validate(doc.Services()); err != nil {
		return err
	}
	sections := doc.Sections()
	for _, s := range sections {
		if err := s.Validate(); err != nil {
			return sectionErr(s.SectionKey(), err)
		}
	}
	serves := func(service string) bool { return slices.Contains(b.Server.Services, service) }
	for _, s := range sections {
		if pv, ok := s.(ProcessValidator); ok {
			if err := pv.ValidateProcess(serves); err != nil {
				return sectionErr(s.SectionKey(), err)
			}
		}
	}
	return nil
}

func sectionErr(section string, err error) error {
	var ce *Error
	if errors.As(err, &ce) {
		return err
	}
	msg := err.Error()
	if strings.HasPrefix(msg, section+".") {
		if k, r, ok := strings.Cut(msg, ": "); ok {
			return &Error{Key: k, Reason: r}
		}
	}
	return &Error{Key: section, Reason: msg}
}

// ValidateAddr checks a HOST:PORT listen address (port 0..65535; host may be empty).
func ValidateAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("malformed address %q: want HOST:PORT", addr)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 {
		return fmt.Errorf("malformed address %q: port must be a number 0..65535", addr)
	}
	if strings.ContainsAny(host, " /") {
		return fmt.Errorf("malformed address %q: bad host", addr)
	}
	return nil
}

// IsLoopback reports whether a listen address binds only loopback interfaces.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Flags are the command-line overrides of `toolplane serve`; nil = not given.
type Flags struct {
	// ConfigFile is the toolplane.yaml to read ("" = none).
	ConfigFile string
	// DataDir, GRPCAddr, HTTPAddr and Services set the server keys of the
	// same names (--data-dir, --grpc-addr, --http-addr, --services).
	DataDir  *string
	GRPCAddr *string
	HTTPAddr *string
	Services *string
	// Keys set keys of any section, in order, after the server flags (a
	// composition root maps its other flags here, e.g. --extensions-config).
	Keys []KeyFlag
}

// KeyFlag is a flag that sets one scalar key.
type KeyFlag struct {
	// Flag is the flag as typed ("--extensions-config"); errors name it.
	Flag string
	// Key is the dotted key path it sets ("catalog.extensions_config").
	Key string
	// Value is the flag's value.
	Value string
	// Check, when set, vets Value first (FileExists, say).
	Check func(value string) error
}

// FileExists is a KeyFlag.Check: the value names an existing file or directory.
func FileExists(path string) error {
	if _, err := os.Stat(path); err != nil {
		return unwrapPath(err)
	}
	return nil
}

// Load fills doc, which must be empty: the file (if any), then the
// environment and the flags over it, then the defaults; then it validates
// the result. doc is to be discarded when Load fails.
func Load(doc Document, f Flags, environ []string) error {
	if _, err := entries(doc); err != nil {
		return err
	}
	if f.ConfigFile != "" {
		data, err := os.ReadFile(f.ConfigFile)
		if err != nil {
			return errf("--config", "%v", err)
		}
		if err := Decode(data, doc); err != nil {
			return err
		}
	}
	if err := applyEnv(doc, environ); err != nil {
		return err
	}
	s := &doc.base().Server
	if f.DataDir != nil {
		s.DataDir = *f.DataDir
	}
	if f.GRPCAddr != nil {
		if err := ValidateAddr(*f.GRPCAddr); err != nil {
			return errf("--grpc-addr", "%v", err)
		}
		s.GRPCAddr = *f.GRPCAddr
	}
	if f.HTTPAddr != nil {
		if err := ValidateAddr(*f.HTTPAddr); err != nil {
			return errf("--http-addr", "%v", err)
		}
		s.HTTPAddr = *f.HTTPAddr
	}
	if f.Services != nil {
		s.Services = splitList(*f.Services)
	}
	for _, k := range f.Keys {
		if k.Check != nil {
			if err := k.Check(k.Value); err != nil {
				return errf(k.Flag, "%v", err)
			}
		}
		if err := SetPath(doc, k.Key, k.Value); err != nil {
			return errf(k.Flag, "%v", err)
		}
	}
	SetDefaults(doc)
	return Validate(doc)
}

// Decode parses YAML into doc, rejecting unknown keys with their full path
// and line. A top-level key must be a base or registered section's.
func Decode(data []byte, doc Document) error {
	es, err := entries(doc)
	if err != nil {
		return err
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return errf("file", "%v", err)
	}
	if len(root.Content) == 0 {
		return nil
	}
	v := value(es)
	if err := checkKnown(root.Content[0], v.Type(), ""); err != nil {
		return err
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(v.Interface()); err != nil {
		// A value of the wrong type: name the key at the reported line.
		var te *yaml.TypeError
		if errors.As(err, &te) && len(te.Errors) > 0 {
			var line int
			if _, serr := fmt.Sscanf(te.Errors[0], "line %d:", &line); serr == nil {
				if key := keyAtLine(root.Content[0], line, ""); key != "" {
					return &Error{Key: key, Reason: te.Errors[0]}
				}
			}
		}
		return errf("file", "%v", strings.ReplaceAll(err.Error(), "\n", " "))
	}
	return nil
}

// Encode returns doc as a YAML mapping: the base sections, then the
// registered sections, in Document order. A Document's MarshalYAML can
// return it (internal/app.Config does).
func Encode(doc Document) (*yaml.Node, error) {
	es, err := entries(doc)
	if err != nil {
		return nil, err
	}
	var n yaml.Node
	if err := n.Encode(value(es).Interface()); err != nil {
		return nil, err
	}
	return &n, nil
}

// keyAtLine returns the dotted path of the first mapping key on line (or
// whose scalar value is on line; block list items as [i]), or "".
func keyAtLine(n *yaml.Node, line int, path string) string {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := join(path, k.Value)
			if k.Line == line || (v.Kind == yaml.ScalarNode && v.Line == line) {
				return p
			}
			if found := keyAtLine(v, line, p); found != "" {
				return found
			}
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			if c.Kind != yaml.MappingNode && c.Line == line {
				return p
			}
			if found := keyAtLine(c, line, p); found != "" {
				return found
			}
		}
	}
	return ""
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	if out == nil {
		out = []string{}
	}
	return out
}

// CheckDataDir makes sure the data directory exists and is writable.
func CheckDataDir(dir string) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return errf("--data-dir", "cannot create %s: %v", dir, err)
	}
	f, err := os.CreateTemp(dir, ".write-test-*")
	if err != nil {
		return errf("--data-dir", "%s is not writable: %v", dir, unwrapPath(err))
	}
	name := f.Name()
	f.Close()
	os.Remove(name)
	return nil
}

func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
