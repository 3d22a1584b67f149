// Package tokens counts model tokens offline with github.com/tiktoken-go/tokenizer
// (the BPE tables are compiled into the binary; nothing is downloaded). It is
// what `toolplane tools stats` uses to compare the tool-related prompt of a
// thread's first turn with binding every tool (docs/architecture.md §3.1).
package tokens

import (
	"fmt"
	"strings"
	"sync"

	"github.com/tiktoken-go/tokenizer"
)

// Supported encodings.
const (
	// O200kBase is the encoding of the GPT-4o / GPT-4.1 / GPT-5 / o-series models.
	O200kBase = "o200k_base"
	// Cl100kBase is the encoding of GPT-4 and GPT-3.5-turbo.
	Cl100kBase = "cl100k_base"
)

// Encodings lists the supported encodings, the default first.
var Encodings = []string{O200kBase, Cl100kBase}

// Counter counts tokens of one encoding. It is safe for concurrent use.
type Counter struct {
	name  string
	codec tokenizer.Codec
}

var (
	mu    sync.Mutex
	cache = map[string]*Counter{}
)

// New returns the Counter of an encoding (one of Encodings). Counters are
// cached: building the BPE table of an encoding happens once per process.
// An unknown encoding is an error naming it and the supported ones.
func New(encoding string) (*Counter, error) {
	mu.Lock()
	defer mu.Unlock()
	if c, ok := cache[encoding]; ok {
		return c, nil
	}
	var enc tokenizer.Encoding
	switch encoding {
	case O200kBase:
		enc = tokenizer.O200kBase
	case Cl100kBase:
		enc = tokenizer.Cl100kBase
	default:
		return nil, fmt.Errorf("tokens: unknown encoding %q (supported: %s)", encoding, strings.Join(Encodings, ", "))
	}
	codec, err := tokenizer.Get(enc)
	if err != nil {
		return nil, fmt.Errorf("tokens: %s: %w", encoding, err)
	}
	c := &Counter{name: encoding, codec: codec}
	cache[encoding] = c
	return c, nil
}

// Name returns the encoding name (e.g. "o200k_base").
func (c *Counter) Name() string { return c.name }

// Count returns the number of tokens of s. Invalid UTF-8 is counted as the
// tokenizer's replacement handling does; the error is returned only when the
// tokenizer refuses the input.
func (c *Counter) Count(s string) (int, error) {
	if s == "" {
		return 0, nil
	}
	n, err := c.codec.Count(s)
	if err != nil {
		return 0, fmt.Errorf("tokens: %s: %w", c.name, err)
	}
	return n, nil
}
