package config_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/toolplane/toolplane/internal/config"
)

// alpha is a registered section as a service would define it: nested
// struct, duration, list, optional bool, a list of structs.
type alpha struct {
	Name    string        `yaml:"name"`
	Timeout time.Duration `yaml:"timeout"`
	Tags    []string      `yaml:"tags"`
	On      *bool         `yaml:"on"`
	Nested  struct {
		Limit int `yaml:"limit"`
	} `yaml:"nested"`
	Items []struct {
		ID string `yaml:"id"`
	} `yaml:"items"`
	// err, when set, is returned by Validate.
	err error
}

func (a *alpha) SectionKey() string { return "alpha" }

func (a *alpha) SetDefaults() {
	if a.Name == "" {
		a.Name = "a"
	}
	if a.Timeout == 0 {
		a.Timeout = time.Second
	}
	if a.Nested.Limit == 0 {
		a.Nested.Limit = 7
	}
}

func (a *alpha) Validate() error {
	if a.err != nil {
		return a.err
	}
	if a.Nested.Limit < 0 {
		return fmt.Errorf("alpha.nested.limit: must be >= 0, got %d", a.Nested.Limit)
	}
	return nil
}

// beta is a section whose validity depends on the process's services.
type beta struct {
	Peer string `yaml:"peer"`
	// served records the services ValidateProcess saw, in AllServices order.
	served []string
}

func (b *beta) SectionKey() string { return "beta" }
func (b *beta) SetDefaults()       {}
func (b *beta) Validate() error    { return nil }
func (b *beta) ValidateProcess(serves func(string) bool) error {
	b.served = nil
	for _, s := range []string{"one", "two", "three"} {
		if serves(s) {
			b.served = append(b.served, s)
		}
	}
	if serves("two") && !serves("one") && b.Peer == "" {
		return errors.New("beta.peer: required when one is not served by this process")
	}
	return nil
}

// doc is a composition root's document with the two sections.
type doc struct {
	config.Base
	Alpha alpha
	Beta  beta
	// extra sections registered after Alpha and Beta (registration tests).
	extra []config.Section
}

func (d *doc) Sections() []config.Section {
	return append([]config.Section{&d.Alpha, &d.Beta}, d.extra...)
}
func (d *doc) Services() []string { return []string{"one", "two", "three"} }

func write(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "toolplane.yaml")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func keyOf(t *testing.T, err error) string {
	t.Helper()
	var ce *config.Error
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v (%T), want a *config.Error", err, err)
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("error spans lines: %q", err)
	}
	return ce.Key
}

// TestRegisteredSectionLoads: a registered section is decoded from its
// subtree, set from TOOLPLANE_<KEY>_<PATH> and from a KeyFlag with the
// precedence flag > env > file > defaults, and defaulted.
func TestRegisteredSectionLoads(t *testing.T) {
	file := write(t, "alpha:\n  name: from-file\n  timeout: 3s\n  tags: [x, y]\n  items:\n    - id: i1\nbeta:\n  peer: p\n")
	env := []string{"TOOLPLANE_ALPHA_TIMEOUT=4s", "TOOLPLANE_ALPHA_NESTED_LIMIT=9", "TOOLPLANE_ALPHA_ON=true", "TOOLPLANE_ALPHA_NAME=from-env"}
	var d doc
	flags := config.Flags{ConfigFile: file, Keys: []config.KeyFlag{{Flag: "--name", Key: "alpha.name", Value: "from-flag"}}}
	if err := config.Load(&d, flags, env); err != nil {
		t.Fatal(err)
	}
	a := d.Alpha
	if a.Name != "from-flag" || a.Timeout != 4*time.Second || a.Nested.Limit != 9 || a.On == nil || !*a.On {
		t.Errorf("flag > env > file: %+v", a)
	}
	if !slices.Equal(a.Tags, []string{"x", "y"}) || len(a.Items) != 1 || a.Items[0].ID != "i1" || d.Beta.Peer != "p" {
		t.Errorf("file values lost: %+v, beta %+v", a, d.Beta)
	}
	// Defaults: the section's own and the base's, with the document's services.
	var e doc
	if err := config.Load(&e, config.Flags{}, nil); err != nil {
		t.Fatal(err)
	}
	if e.Alpha.Name != "a" || e.Alpha.Timeout != time.Second || e.Alpha.Nested.Limit != 7 {
		t.Errorf("section defaults: %+v", e.Alpha)
	}
	if !slices.Equal(e.Server.Services, []string{"one", "two", "three"}) || e.Server.GRPCAddr != "127.0.0.1:7420" {
		t.Errorf("base defaults: %+v", e.Server)
	}
	// Every scalar key of the section has its variable; lists of structs do not.
	var paths []string
	for _, l := range config.Leaves(&e) {
		if strings.HasPrefix(l.Path, "alpha.") {
			paths = append(paths, l.Path+"="+l.Env)
		}
	}
	want := []string{"alpha.name=TOOLPLANE_ALPHA_NAME", "alpha.nested.limit=TOOLPLANE_ALPHA_NESTED_LIMIT", "alpha.on=TOOLPLANE_ALPHA_ON", "alpha.tags=TOOLPLANE_ALPHA_TAGS", "alpha.timeout=TOOLPLANE_ALPHA_TIMEOUT"}
	if !slices.Equal(paths, want) {
		t.Errorf("leaves %q, want %q", paths, want)
	}
}

// TestRegisteredSectionErrors: unknown keys, wrong types, bad variables and
// flags, and the section's own validation name the key, variable or flag.
func TestRegisteredSectionErrors(t *testing.T) {
	cases := []struct {
		name  string
		yaml  string
		env   []string
		keys  []config.KeyFlag
		key   string
		in    string
		setup func(*doc)
	}{
		{name: "unregistered top-level key", yaml: "gamma:\n  x: 1\n", key: "gamma", in: "unknown key (line 1)"},
		{name: "unknown nested key", yaml: "alpha:\n  nested:\n    limit: 1\n    limt: 2\n", key: "alpha.nested.limt", in: "unknown key (line 4)"},
		{name: "unknown key in a list item", yaml: "alpha:\n  items:\n    - id: a\n    - idd: b\n", key: "alpha.items[1].idd", in: "line 4"},
		{name: "wrong type", yaml: "alpha:\n  name: ok\n  timeout: [1]\n", key: "alpha.timeout", in: "line 3"},
		{name: "not a mapping", yaml: "alpha: 3\n", key: "alpha", in: "line 1"},
		{name: "bad variable", env: []string{"TOOLPLANE_ALPHA_NESTED_LIMIT=many"}, key: "TOOLPLANE_ALPHA_NESTED_LIMIT", in: "many"},
		{name: "section validation", yaml: "alpha:\n  nested:\n    limit: -1\n", key: "alpha.nested.limit", in: "must be >= 0"},
		{name: "flag to an unknown key", keys: []config.KeyFlag{{Flag: "--x", Key: "alpha.nope", Value: "1"}}, key: "--x", in: "no configuration key alpha.nope"},
		{name: "flag check fails", keys: []config.KeyFlag{{Flag: "--file", Key: "alpha.name", Value: "/nonexistent/f", Check: config.FileExists}}, key: "--file", in: "no such file"},
		{name: "flag value unparsable", keys: []config.KeyFlag{{Flag: "--limit", Key: "alpha.nested.limit", Value: "x"}}, key: "--limit", in: "invalid integer"},
		{name: "unknown service", env: []string{"TOOLPLANE_SERVER_SERVICES=one,four"}, key: "server.services", in: "want a subset of one,two,three"},
		{name: "process validation", env: []string{"TOOLPLANE_SERVER_SERVICES=two"}, key: "beta.peer", in: "required when one"},
		{name: "base first", yaml: "server:\n  log:\n    level: loud\nalpha:\n  nested:\n    limit: -1\n", key: "server.log.level"},
		{name: "error without a path names the section", setup: func(d *doc) { d.Alpha.err = errors.New("broken") }, key: "alpha", in: "broken"},
		{name: "an *Error passes unchanged", setup: func(d *doc) { d.Alpha.err = &config.Error{Key: "alpha.name", Reason: "taken"} }, key: "alpha.name", in: "taken"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var d doc
			if tc.setup != nil {
				tc.setup(&d)
			}
			f := config.Flags{Keys: tc.keys}
			if tc.yaml != "" {
				f.ConfigFile = write(t, tc.yaml)
			}
			err := config.Load(&d, f, tc.env)
			if got := keyOf(t, err); got != tc.key || !strings.Contains(err.Error(), tc.in) {
				t.Errorf("err = %q; want key %s and %q", err, tc.key, tc.in)
			}
		})
	}
}

// TestProcessValidatorSeesServices: ValidateProcess learns exactly the
// services of server.services.
func TestProcessValidatorSeesServices(t *testing.T) {
	var d doc
	svc := "three,one"
	if err := config.Load(&d, config.Flags{Services: &svc}, nil); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(d.Beta.served, []string{"one", "three"}) {
		t.Errorf("served %q, want [one three]", d.Beta.served)
	}
}

// bad is a section with a configurable key and value shape.
type bad struct {
	key string
	X   int `yaml:"x"`
}

func (b *bad) SectionKey() string { return b.key }
func (b *bad) SetDefaults()       {}
func (b *bad) Validate() error    { return nil }

// notStruct is a section that is not a struct.
type notStruct map[string]string

func (notStruct) SectionKey() string { return "ns" }
func (notStruct) SetDefaults()       {}
func (notStruct) Validate() error    { return nil }

// TestRegistrationErrors: a broken registration is refused by Load, Decode
// and Validate with a plain error (a programming error, not the file's),
// naming the key and the section's type.
func TestRegistrationErrors(t *testing.T) {
	cases := []struct {
		name  string
		extra []config.Section
		in    string
	}{
		{"duplicate key", []config.Section{&bad{key: "alpha"}}, `"alpha" of *config_test.bad is already registered by *config_test.alpha`},
		{"a base key", []config.Section{&bad{key: "server"}}, `"server" of *config_test.bad is already registered by the base`},
		{"malformed key", []config.Section{&bad{key: "Bad-Key"}}, `malformed key "Bad-Key"`},
		{"nil section", []config.Section{nil}, "nil section"},
		{"not a struct", []config.Section{notStruct{}}, `section "ns" must be a non-nil pointer to a struct`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := doc{extra: tc.extra}
			for _, err := range []error{
				config.Load(&d, config.Flags{}, nil),
				config.Decode([]byte("alpha: {}\n"), &d),
				config.Validate(&d),
			} {
				var ce *config.Error
				if err == nil || errors.As(err, &ce) || !strings.Contains(err.Error(), tc.in) {
					t.Errorf("err = %v; want a plain error containing %q", err, tc.in)
				}
			}
		})
	}
}

// TestEncodeRoundTrip: Encode writes the base sections, then the
// registered ones in order, and what it writes decodes to the same values.
func TestEncodeRoundTrip(t *testing.T) {
	var d doc
	on := true
	d.Alpha.On = &on
	d.Alpha.Tags = []string{"t"}
	d.Beta.Peer = "peer:1"
	config.SetDefaults(&d)
	n, err := config.Encode(&d)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for i := 0; i+1 < len(n.Content); i += 2 {
		keys = append(keys, n.Content[i].Value)
	}
	if !slices.Equal(keys, []string{"server", "auth", "alpha", "beta"}) {
		t.Fatalf("top-level keys %q", keys)
	}
	data, err := yaml.Marshal(n)
	if err != nil {
		t.Fatal(err)
	}
	var back doc
	if err := config.Decode(data, &back); err != nil {
		t.Fatalf("encoded document does not decode: %v\n%s", err, data)
	}
	got, want := map[string]string{}, map[string]string{}
	for _, l := range config.Leaves(&back) {
		got[l.Path] = fmt.Sprint(l.Value.Interface())
	}
	for _, l := range config.Leaves(&d) {
		want[l.Path] = fmt.Sprint(l.Value.Interface())
	}
	delete(got, "alpha.on") // a pointer: compared below
	delete(want, "alpha.on")
	if fmt.Sprint(got) != fmt.Sprint(want) || back.Alpha.On == nil || !*back.Alpha.On {
		t.Errorf("round trip:\n got %v\nwant %v", got, want)
	}
}
