package evalsearch

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// The catalog benchmark is the third, larger benchmark of docs/search.md
// ("Catalog benchmark"): built from an MCP catalog with input schemas
// (mcp-catalog/mcpm-registry), it may be used for tuning without touching
// the two toolret DEV sets. Its queries are synthesised from one field of a
// tool — the descriptions of its parameters — and are matched against the
// other fields (name, description, server), which are all that is indexed.
// It is a weak signal: parameter descriptions are written by the tool's
// author in the tool's own vocabulary, not by a user.

// Set is a tool catalog with labelled queries.
type Set struct {
	// Tools are the indexed tools (without the field queries came from).
	Tools []Tool
	// Queries are the synthesised queries.
	Queries []Query
}

// CatalogBenchStats counts what BuildCatalogBenchmark kept and dropped.
type CatalogBenchStats struct {
	// Tools is the number of catalog rows read.
	Tools int `json:"tools"`
	// DroppedToolret counts tools dropped because their description occurs
	// verbatim in an excluded (toolret) tool set.
	DroppedToolret int `json:"dropped_toolret"`
	// Servers, TrainServers and BenchServers count servers after dropping.
	Servers      int `json:"servers"`
	TrainServers int `json:"train_servers"`
	BenchServers int `json:"bench_servers"`
	// TrainTools, BenchTools, TrainQueries and BenchQueries size the parts.
	TrainTools   int `json:"train_tools"`
	BenchTools   int `json:"bench_tools"`
	TrainQueries int `json:"train_queries"`
	BenchQueries int `json:"bench_queries"`
}

// CatalogBench is the catalog benchmark split by server.
type CatalogBench struct {
	// Train may be used for tuning and for training word vectors.
	Train Set
	// Bench is only evaluated.
	Bench Set
	// Stats counts the parts.
	Stats CatalogBenchStats
}

// MinQueryWords is the fewest words (README tokenisation) a synthesised
// query must have; shorter parameter descriptions ("The ID") carry no task.
const MinQueryWords = 4

// IsCatalogTrainServer reports whether server belongs to the training part:
// the first 4 bytes of SHA-256("server:" + server), as a big-endian
// integer, mod 100 below 50.
func IsCatalogTrainServer(server string) bool {
	sum := sha256.Sum256([]byte("server:" + server))
	return binary.BigEndian.Uint32(sum[:4])%100 < 50
}

// BuildCatalogBenchmark reads a catalog in the tools.jsonl format, drops
// every tool whose description (trimmed, non-empty) occurs verbatim in one
// of the exclude files (the toolret tool sets), splits the rest by server
// (IsCatalogTrainServer) and synthesises one query per distinct parameter
// text: the descriptions of a tool's top-level parameters in parameter-name
// order, joined with "; ", kept when it has at least MinQueryWords words.
// Tools whose parameter texts coincide are all relevant to that query. The
// indexed tools keep name, description and server; their schemas are
// dropped, so the query's field is never indexed.
func BuildCatalogBenchmark(catalogPath string, excludePaths []string) (*CatalogBench, error) {
	if catalogPath == "" {
		return nil, errors.New("catalog: a tools JSONL file is required")
	}
	rows, err := readJSONL[Tool](catalogPath)
	if err != nil {
		return nil, err
	}
	exclude := map[string]bool{}
	for _, p := range excludePaths {
		ex, err := readJSONL[Tool](p)
		if err != nil {
			return nil, err
		}
		for _, t := range ex {
			if d := strings.TrimSpace(t.Description); d != "" {
				exclude[d] = true
			}
		}
	}
	cb := &CatalogBench{Stats: CatalogBenchStats{Tools: len(rows)}}
	servers := map[string]bool{}
	type group struct {
		text  string
		names []string
	}
	groups := [2]map[string]*group{{}, {}}
	var order [2][]string
	for _, t := range rows {
		if exclude[strings.TrimSpace(t.Description)] {
			cb.Stats.DroppedToolret++
			continue
		}
		server := ""
		if t.Server != nil {
			server = *t.Server
		}
		part := 1
		if IsCatalogTrainServer(server) {
			part = 0
		}
		if !servers[server] {
			servers[server] = true
			if part == 0 {
				cb.Stats.TrainServers++
			} else {
				cb.Stats.BenchServers++
			}
		}
		indexed := Tool{Name: t.Name, Description: t.Description, Server: t.Server}
		set := &cb.Bench
		if part == 0 {
			set = &cb.Train
		}
		set.Tools = append(set.Tools, indexed)
		text := paramText(t.InputSchema)
		if len(basicTokens(text)) < MinQueryWords || strings.TrimSpace(t.Description) == "" {
			continue
		}
		g := groups[part][text]
		if g == nil {
			g = &group{text: text}
			groups[part][text] = g
			order[part] = append(order[part], text)
		}
		g.names = append(g.names, t.Name)
	}
	for part, set := range []*Set{&cb.Train, &cb.Bench} {
		for _, text := range order[part] {
			g := groups[part][text]
			sum := sha256.Sum256([]byte(text))
			set.Queries = append(set.Queries, Query{ID: "mc-" + hex.EncodeToString(sum[:6]), Query: text, Relevant: slices.Clone(g.names)})
		}
	}
	cb.Stats.Servers = len(servers)
	cb.Stats.TrainTools, cb.Stats.BenchTools = len(cb.Train.Tools), len(cb.Bench.Tools)
	cb.Stats.TrainQueries, cb.Stats.BenchQueries = len(cb.Train.Queries), len(cb.Bench.Queries)
	if len(cb.Bench.Queries) == 0 {
		return nil, fmt.Errorf("catalog %s: no query could be synthesised (no parameter descriptions)", catalogPath)
	}
	return cb, nil
}

// paramText joins the trimmed "description" of every top-level property of
// schema, in property-name order, with "; ". Titles are not used: MCP SDKs
// derive them from the parameter name, which would leak the name field.
func paramText(schema json.RawMessage) string {
	if len(schema) == 0 {
		return ""
	}
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if json.Unmarshal(schema, &s) != nil {
		return ""
	}
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		names = append(names, n)
	}
	slices.Sort(names)
	var parts []string
	for _, n := range names {
		var p struct {
			Description string `json:"description"`
		}
		if json.Unmarshal(s.Properties[n], &p) != nil {
			continue
		}
		if d := strings.Join(strings.Fields(p.Description), " "); d != "" {
			parts = append(parts, d)
		}
	}
	return strings.Join(parts, "; ")
}
