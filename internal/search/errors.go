package search

import (
	"errors"
	"fmt"
)

// ErrInvalidQuery is the sentinel every query-validation error matches with
// errors.Is. The catalog (and skills) map it to gRPC INVALID_ARGUMENT.
var ErrInvalidQuery = errors.New("search: invalid query")

// ErrInvalidDocument is the sentinel matched by errors from Upsert/Replace
// when a Document is unusable (empty or non-UTF-8 name).
var ErrInvalidDocument = errors.New("search: invalid document")

// ErrEmbedding is the sentinel matched by errors of an Embedder (network,
// HTTP status, malformed response). The catalog maps it to UNAVAILABLE when a
// SEMANTIC search cannot embed its query; AUTO falls back to lexical ranking
// instead of failing.
var ErrEmbedding = errors.New("search: embedding failed")

// QueryError describes why a query or request was rejected. It matches
// ErrInvalidQuery with errors.Is.
type QueryError struct {
	// Field names the request field at fault ("query", "mode", "candidates").
	Field string
	// Reason says what is wrong, e.g. "longer than 4096 bytes".
	Reason string
}

// Error implements error.
func (e *QueryError) Error() string { return fmt.Sprintf("%s: %s", e.Field, e.Reason) }

// Is reports whether target is ErrInvalidQuery.
func (e *QueryError) Is(target error) bool { return target == ErrInvalidQuery }

func queryErr(field, format string, args ...any) error {
	return &QueryError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// DocumentError describes why a Document was rejected. It matches
// ErrInvalidDocument with errors.Is.
type DocumentError struct {
	// Name is the offending document name (possibly empty).
	Name string
	// Reason says what is wrong.
	Reason string
}

// Error implements error.
func (e *DocumentError) Error() string {
	return fmt.Sprintf("search: document %q: %s", e.Name, e.Reason)
}

// Is reports whether target is ErrInvalidDocument.
func (e *DocumentError) Is(target error) bool { return target == ErrInvalidDocument }

// EmbedError wraps an Embedder failure. It matches ErrEmbedding with
// errors.Is and unwraps to the cause.
type EmbedError struct {
	// Op is what was being embedded ("query" or "documents").
	Op string
	// Err is the underlying failure.
	Err error
}

// Error implements error.
func (e *EmbedError) Error() string { return fmt.Sprintf("search: embedding %s: %v", e.Op, e.Err) }

// Is reports whether target is ErrEmbedding.
func (e *EmbedError) Is(target error) bool { return target == ErrEmbedding }

// Unwrap returns the cause.
func (e *EmbedError) Unwrap() error { return e.Err }
