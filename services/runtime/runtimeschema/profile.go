// Package runtimeschema binds MCP tool definitions to the form one model
// provider accepts (a provider profile), and maps the model's arguments back
// to the shape the MCP tool expects (docs/architecture.md §3.1, §3.2).
//
// A Profile states the provider's rules, taken from its public
// documentation (cited on each profile below). Normalize turns a tool's
// input schema into that profile's form, deterministically, never changing
// the input; every change is reported as a Change of a named kind. A tool
// that cannot be made valid is refused with a reason (LeftOut) so the
// caller can leave it out of the binding without failing the request.
// Check is an independent validator of a profile's rules over the rendered
// form, written from the same documentation and not sharing the
// normaliser's code; the tests run every normalised schema through it.
// MapArguments undoes what the normaliser did to the arguments' shape
// (wrapped unions, renamed properties, nullable-instead-of-optional,
// objects carried as JSON text).
package runtimeschema

import "regexp"

// ID names a provider profile.
type ID string

// The profiles.
const (
	// OpenAIChat is the Chat Completions API's function tools.
	OpenAIChat ID = "openai_chat"
	// OpenAIResponses is the Responses API's function tools.
	OpenAIResponses ID = "openai_responses"
	// AnthropicMessages is the Messages API's client tools.
	AnthropicMessages ID = "anthropic_messages"
	// Gemini is the Gemini API's function declarations.
	Gemini ID = "gemini"
	// MCP is a tools/list answer of Toolplane's MCP front door.
	MCP ID = "mcp"
)

// IDs lists every profile in a fixed order.
var IDs = []ID{OpenAIChat, OpenAIResponses, AnthropicMessages, Gemini, MCP}

// Dialect names the schema language a profile accepts.
type Dialect string

const (
	// JSONSchema is JSON Schema (draft 2020-12 and the earlier drafts the
	// providers read alike).
	JSONSchema Dialect = "json-schema"
	// OpenAPISubset is the "select subset of an OpenAPI 3.0 schema object"
	// of Gemini's Schema message.
	OpenAPISubset Dialect = "openapi-3.0-subset"
)

// Profile is the set of rules a bound tool must meet for one provider.
type Profile struct {
	// ID is the profile's name.
	ID ID
	// NamePattern is the tool-name pattern (length included).
	NamePattern *regexp.Regexp
	// NameMax is the maximum tool-name length in bytes (0 = none).
	NameMax int
	// DescriptionMax bounds the tool description in characters (0 = none).
	DescriptionMax int
	// Dialect is the schema language of the parameters.
	Dialect Dialect
	// RootForbidden are keywords refused at the root of the parameters
	// (beyond "type must be object").
	RootForbidden []string
	// Refs reports whether $ref to the root's $defs/definitions is accepted.
	Refs bool
	// RootOnly: only the root is fixed; everything below passes unchanged
	// (the mcp profile).
	RootOnly bool
	// ArrayNeedsItems: an array schema must say its items.
	ArrayNeedsItems bool
	// Strict: the profile binds with OpenAI strict mode when the schema
	// allows it (else strict is sent false, explicitly).
	Strict bool
	// Keywords, when non-nil, is the whitelist of schema keywords at every
	// node; others are dropped with their constraint moved into the
	// description.
	Keywords map[string]bool
	// PropertyNamePattern, when non-nil, is the pattern property names must
	// match; others are renamed and mapped back.
	PropertyNamePattern *regexp.Regexp
	// SingleType: "type" must be a single name (nullable: true for null).
	SingleType bool
	// ObjectNeedsProperties: a nested object schema must have at least one
	// property; a free-form object is carried as JSON text.
	ObjectNeedsProperties bool
	// StringEnumsOnly: enum is allowed on strings only.
	StringEnumsOnly bool
	// NoParamsOmitted: a tool without arguments is bound without parameters.
	NoParamsOmitted bool
}

var (
	// "The name of the function to be called. Must be a-z, A-Z, 0-9, or
	// contain underscores and dashes, with a maximum length of 64." — OpenAI
	// API reference, Chat Completions `tools[].function.name` and Responses
	// `tools[].name`. Anthropic's Messages API reference, `tools[].name`:
	// "Must match the regex ^[a-zA-Z0-9_-]{1,64}$" (same set).
	namePattern64 = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
	// Gemini FunctionDeclaration.name: "Must start with a letter or an
	// underscore. Must be a-z, A-Z, 0-9, or contain underscores, dots and
	// dashes, with a maximum length of 64." (Vertex AI / Gemini API reference,
	// FunctionDeclaration).
	geminiNamePattern = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_.-]{0,63}$`)
	// Gemini FunctionDeclaration.parameters: "Parameter names must start
	// with a letter or an underscore and must only contain chars a-z, A-Z,
	// 0-9, or underscores with a maximum length of 64."
	geminiPropertyPattern = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]{0,63}$`)
	// MCP 2025-11-25, Tool.name: 1 to 128 characters of A-Z a-z 0-9 _ - .
	// (the specification's tool-name guidance, a SHOULD the official SDKs
	// only warn about; the front door's names are Toolplane's own).
	mcpNamePattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)
)

// rootCombinators are refused at the root by every provider API:
// OpenAI "Root objects must not be anyOf and must be an object" (Structured
// Outputs, Supported schemas; the function-calling parameters are "a JSON
// Schema object" and are answered 400 otherwise); Anthropic answers
// "input_schema does not support oneOf, allOf, or anyOf at the top level";
// Gemini's parameters are a Schema of type OBJECT.
var rootCombinators = []string{"anyOf", "oneOf", "allOf", "not", "if", "then", "else", "enum", "const"}

// strictKeywords are the keywords OpenAI strict mode accepts (Structured
// Outputs, "Supported schemas": types string, number, boolean, integer,
// object, array, enum, anyOf; string pattern and format; number multipleOf,
// maximum, exclusiveMaximum, minimum, exclusiveMinimum; array minItems,
// maxItems; objects by properties, required, additionalProperties;
// definitions by $defs and $ref; description). Composition keywords (allOf,
// not, dependentRequired, dependentSchemas, if, then, else) are listed as
// unsupported; the rest are not in the supported list and are dropped.
var strictKeywords = set("type", "description", "title", "enum", "const", "anyOf",
	"properties", "required", "additionalProperties", "items", "$ref", "$defs", "definitions",
	"pattern", "format", "multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum",
	"minItems", "maxItems")

// Strict-mode limits (Structured Outputs, "Supported schemas", limitations):
// up to 5,000 object properties in total, up to 10 levels of nesting, at
// most 120,000 characters over all property names, definition names, enum
// values and const values, at most 1,000 enum values in total, and for one
// string enum of more than 250 values at most 15,000 characters of values.
const (
	strictMaxProperties   = 5000
	strictMaxDepth        = 10
	strictMaxStringChars  = 120000
	strictMaxEnumValues   = 1000
	strictBigEnum         = 250
	strictBigEnumMaxChars = 15000
)

// strictFormats are the string formats strict mode supports.
var strictFormats = set("date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid")

// geminiKeywords are the fields of Gemini's Schema message ("a select subset
// of an OpenAPI 3.0 schema object", Gemini API / Vertex AI reference,
// Schema): type, format, title, description, nullable, enum, maxItems,
// minItems, properties, required, minProperties, maxProperties, minLength,
// maxLength, pattern, example, anyOf, propertyOrdering, default, items,
// minimum, maximum.
var geminiKeywords = set("type", "format", "title", "description", "nullable", "enum",
	"maxItems", "minItems", "properties", "required", "minProperties", "maxProperties",
	"minLength", "maxLength", "pattern", "example", "anyOf", "propertyOrdering", "default",
	"items", "minimum", "maximum")

// descriptionMax is Toolplane's own bound on a bound tool's description
// (no provider documents a smaller one; it keeps one tool from filling the
// prompt): moved constraints are appended within it.
const descriptionMax = 8192

// wrapKey is the single property a wrapped root union is carried in.
const wrapKey = "input"

// maxBoundSchemaBytes bounds a normalised schema (after $ref inlining): a
// larger one is left out (inlining a DAG of $refs can grow exponentially).
const maxBoundSchemaBytes = 256 << 10

var profiles = map[ID]*Profile{
	OpenAIChat: {
		ID: OpenAIChat, NamePattern: namePattern64, NameMax: 64, DescriptionMax: descriptionMax,
		Dialect: JSONSchema, RootForbidden: rootCombinators, Refs: true,
		// OpenAI answers 400 "array schema missing items" for an array
		// without items (function parameters are validated as JSON Schema).
		ArrayNeedsItems: true,
	},
	OpenAIResponses: {
		ID: OpenAIResponses, NamePattern: namePattern64, NameMax: 64, DescriptionMax: descriptionMax,
		Dialect: JSONSchema, RootForbidden: rootCombinators, Refs: true, ArrayNeedsItems: true,
		// Responses API function tools: "strict: Whether to enforce strict
		// parameter validation. Default true." — so the profile binds
		// strictly where it can and sends strict: false explicitly where not.
		Strict: true,
	},
	AnthropicMessages: {
		ID: AnthropicMessages, NamePattern: namePattern64, NameMax: 64, DescriptionMax: descriptionMax,
		// Messages API tools[].input_schema: "JSON schema for this tool's
		// input ... type: object" (required, const "object"); JSON Schema
		// draft 2020-12 with local $defs/$ref.
		Dialect: JSONSchema, RootForbidden: rootCombinators, Refs: true,
	},
	Gemini: {
		ID: Gemini, NamePattern: geminiNamePattern, NameMax: 64, DescriptionMax: descriptionMax,
		Dialect: OpenAPISubset, RootForbidden: rootCombinators, Refs: false,
		Keywords: geminiKeywords, PropertyNamePattern: geminiPropertyPattern, SingleType: true,
		// Gemini answers 400 "properties: should be non-empty for OBJECT
		// type" and "items: missing field" ; "For function with no
		// parameters, this can be left unset" (FunctionDeclaration.parameters).
		ObjectNeedsProperties: true, ArrayNeedsItems: true, StringEnumsOnly: true, NoParamsOmitted: true,
	},
	MCP: {
		// MCP 2025-11-25 Tool.inputSchema: `{ "$schema"?: string; type:
		// "object"; properties?: {...}; required?: string[] }`, JSON Schema
		// 2020-12 by default; the official TypeScript SDK's ListToolsResult
		// parsing requires type "object". Only the root is fixed.
		ID: MCP, NamePattern: mcpNamePattern, NameMax: 128, DescriptionMax: 0,
		Dialect: JSONSchema, Refs: true, RootOnly: true,
	},
}

// NameValid reports whether name is a valid tool name for the profile as it is.
func (p *Profile) NameValid(name string) bool { return p.NamePattern.MatchString(name) }

// Get returns a profile by id.
func Get(id ID) (*Profile, bool) { p, ok := profiles[id]; return p, ok }

func set(ks ...string) map[string]bool {
	m := make(map[string]bool, len(ks))
	for _, k := range ks {
		m[k] = true
	}
	return m
}
