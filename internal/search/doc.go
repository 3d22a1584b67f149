// Package search is Toolplane's tool-search library: the query parser and
// the rankers behind catalog SearchTools and skills DescribeSkills. It is a
// pure library (no gRPC, no storage, no network except an optional
// embeddings endpoint).
//
// # Usage (catalog and skills)
//
//	ix := search.NewIndex(search.Options{})           // static vectors, AUTO = BM25F + semantic
//	err := ix.Replace(ctx, docs)                      // initial load, docs in catalog order
//	err = ix.Upsert(ctx, changed...)                  // a server's tools changed (by Name)
//	ix.Remove(gone...)                                // tools disappeared
//	resp, err := ix.Search(ctx, search.Request{
//		Query:      req.GetQuery(),                   // raw tool_search text
//		Mode:       search.ModeAuto,                  // map SEARCH_MODE_* (UNSPECIFIED → ModeAuto)
//		Limit:      int(req.GetLimit()),              // <= 0 → 5; the service enforces its caller cap
//		Candidates: req.GetCandidates(),              // nil = whole index
//	})
//	// resp.Results: Name, Score, Matched fields; resp.Truncated for select:.
//	// errors.Is(err, search.ErrInvalidQuery) → INVALID_ARGUMENT (err names the field);
//	// errors.Is(err, search.ErrEmbedding)    → UNAVAILABLE (SEMANTIC with a failing remote embedder).
//
// Build a Document per tool with ParamsFromSchema(inputSchema) for the
// parameter fields; skills put the skill name in Name and its description
// (and tags in Keywords). Upsert/Replace return an *EmbedError (ErrEmbedding)
// after still applying the documents lexically when a remote Embedder fails;
// log it and retry later. To use a deployment's embedding model, pass
// Options.Embedder = NewCachedEmbedder(NewHTTPEmbedder(cfg), model, cache),
// with the catalog's sqlite-backed VectorCache (MemoryCache in memory).
// Use ix.Snapshot() to run several searches on one consistent view.
//
// # Query forms (docs/deerflow.md §2.3)
//
//   - "select:a,b" — exact, case-sensitive names, in catalog order, unknown
//     names ignored, Limit ignored, at most MaxSelectResults with Truncated.
//   - "+required rest" — the first token must be a case-insensitive
//     substring of the name; rest ranks in the request's mode; other
//     required matches follow in catalog order up to Limit.
//   - anything else — ranked in the request's mode.
//
// Blank query → no results; over MaxQueryBytes (4 KiB; 1 MiB for select:)
// or invalid UTF-8 → ErrInvalidQuery; REGEX patterns over MaxRegexChars →
// ErrInvalidQuery.
//
// # Modes
//
//   - ModeRegex: DeerFlow's algorithm — case-insensitive RE2 over
//     "name description", invalid pattern → literal, name match scores 2
//     else 1, stable. RE2 cannot backtrack, so no pattern hangs.
//   - ModeBM25: BM25F over name (split on `_ - . /` and camelCase), title and
//     keywords, description, parameter names and descriptions, and server
//     name/description, with per-field weights and length normalisation,
//     Snowball English stemming and stop words; ties in catalog order.
//   - ModeSemantic: cosine similarity of SIF-weighted, centred sentence
//     vectors from 100-dimension static word vectors trained offline on
//     Debian package descriptions, WordNet glosses and in-domain MCP tool
//     texts (package vectors).
//   - ModeAuto (default): a calibrated weighted sum of max-normalised BM25F
//     scores and cosine similarities, its settings chosen by
//     cross-validation (docs/search.md). Its top results are found without
//     scanning every vector: exact bounds prune the lexical hits and the
//     semantic-only candidates, and an int8 IVF index supplies the latter
//     when they can still reach the top (ann.go,
//     docs/decisions/0052-auto-topk-ivf.md).
//
// # Concurrency
//
// An Index is safe for concurrent use. Writers are serialised and build a
// new copy-on-write Snapshot that is published with an atomic pointer swap;
// a search never waits for a writer and never sees a half-built index.
package search
