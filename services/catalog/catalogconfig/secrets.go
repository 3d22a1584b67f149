package catalogconfig

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Mask is the placeholder shown instead of a secret value. Sending it back
// in a write keeps the stored value (MergeMasked).
const Mask = "***"

var secretWords = []string{"token", "secret", "key", "password", "passwd", "authorization", "auth", "credential", "cookie"}

// IsSecretKey reports whether a key name looks like it holds a secret
// (token, secret, key, password, authorization, ..., case-insensitive).
func IsSecretKey(k string) bool {
	l := strings.ToLower(k)
	for _, w := range secretWords {
		if strings.Contains(l, w) {
			return true
		}
	}
	return false
}

// Masked returns a copy of s with every secret replaced by Mask: all env
// values, all header values, and, inside unknown keys, any string under a key
// named like a secret (IsSecretKey). Arguments are shown as configured: a
// secret belongs in env or headers (with a `$VAR` placeholder), not in args.
func Masked(s Server) Server {
	out := s.Clone()
	for k := range out.Env {
		out.Env[k] = Mask
	}
	for k := range out.Headers {
		out.Headers[k] = Mask
	}
	for i, m := range out.Extra {
		out.Extra[i].Value = maskRaw(m.Key, m.Value)
	}
	return out
}

func maskRaw(key string, raw json.RawMessage) json.RawMessage {
	var v any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if d.Decode(&v) != nil {
		return raw
	}
	v = maskValue(IsSecretKey(key), v)
	b, err := json.Marshal(v)
	if err != nil {
		return raw
	}
	return b
}

func maskValue(secret bool, v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = maskValue(secret || IsSecretKey(k), e)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = maskValue(secret, e)
		}
		return x
	case string:
		if secret {
			return Mask
		}
	}
	return v
}

// MergeMasked returns next with every Mask value in env and headers replaced
// by the stored value of the same key of prev (the same server before the
// write). A Mask with nothing stored is an error naming the field. Masked
// values inside unknown keys are restored from prev's same key wholesale.
func MergeMasked(next Server, prev *Server) (Server, error) {
	out := next.Clone()
	restore := func(field string, m map[string]string, old map[string]string) error {
		for k, v := range m {
			if v != Mask {
				continue
			}
			ov, ok := old[k]
			if !ok {
				return fmt.Errorf("mcpServers.%s.%s.%s: %q given but no value is stored", next.Name, field, k, Mask)
			}
			m[k] = ov
		}
		return nil
	}
	var oldEnv, oldHeaders map[string]string
	if prev != nil {
		oldEnv, oldHeaders = prev.Env, prev.Headers
	}
	if err := restore("env", out.Env, oldEnv); err != nil {
		return next, err
	}
	if err := restore("headers", out.Headers, oldHeaders); err != nil {
		return next, err
	}
	for i, m := range out.Extra {
		if !bytes.Contains(m.Value, []byte(`"`+Mask+`"`)) {
			continue
		}
		if prev == nil {
			return next, fmt.Errorf("mcpServers.%s.%s: %q given but no value is stored", next.Name, m.Key, Mask)
		}
		j := slices.IndexFunc(prev.Extra, func(f RawField) bool { return f.Key == m.Key })
		if j < 0 {
			return next, fmt.Errorf("mcpServers.%s.%s: %q given but no value is stored", next.Name, m.Key, Mask)
		}
		out.Extra[i].Value = prev.Extra[j].Value
	}
	return out, nil
}
