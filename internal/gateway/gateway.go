// Package gateway builds the HTTP listener's handler: the grpc-gateway REST
// mirror (a gRPC client of our own listener that forwards the caller's
// Authorization header), /healthz, /readyz, /metrics and /openapi.json.
package gateway

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/toolplane/toolplane/internal/auth"
)

// OpenAPI is the merged OpenAPI v2 spec of every service, generated from the
// protos and http.yaml: gen/openapi/toolplane.swagger.json post-processed by
// internal/openapispec (title, release version, bearer security, unique path
// templates, readable operation ids) in `make generate`; check-generated and
// tests/contract keep them in step.
//
//go:embed openapi.json
var OpenAPI []byte

// NewMux returns a gateway mux with Toolplane's marshalling: proto field names
// (snake_case, as in the routes), default values emitted, enums as names on
// output and names or numbers on input, unknown fields rejected. A wrong
// method answers 405 with Allow and a path variable holding ':' 400
// (routing.go). Extra options (e.g. RequireCredential) are applied after the
// route probe and before the ':' check, so an anonymous caller gets 401
// before any input is judged.
func NewMux(extra ...runtime.ServeMuxOption) *runtime.ServeMux {
	m := &runtime.JSONPb{
		MarshalOptions:   protojson.MarshalOptions{UseProtoNames: true, EmitDefaultValues: true},
		UnmarshalOptions: protojson.UnmarshalOptions{DiscardUnknown: false},
	}
	var mux *runtime.ServeMux
	opts := []runtime.ServeMuxOption{
		runtime.WithMarshalerOption(runtime.MIMEWildcard, errorBodyMarshaler{m}),
		runtime.WithIncomingHeaderMatcher(headerMatcher),
		runtime.WithOutgoingHeaderMatcher(func(k string) (string, bool) {
			if k == "x-request-id" {
				return "X-Request-Id", true
			}
			return runtime.DefaultHeaderMatcher(k)
		}),
		runtime.WithRoutingErrorHandler(routingErrorHandler),
		runtime.WithMiddlewares(probeMiddleware),
	}
	opts = append(opts, extra...)
	opts = append(opts, runtime.WithMiddlewares(colonMiddleware(func() *runtime.ServeMux { return mux })))
	mux = runtime.NewServeMux(opts...)
	return mux
}

// RequireCredential refuses a REST call without a valid credential with 401
// and the gateway's JSON error body (code 16) before the request body is
// decoded: otherwise a malformed body would answer 400 to an anonymous caller
// (docs/architecture.md §5, "no token → UNAUTHENTICATED, also with a malformed body"). Only
// UNAUTHENTICATED is decided here; the gRPC chain behind the gateway checks
// the credential again and does everything else. onRefused, when given,
// is told of each refusal whose request carried a credential (failed
// logins, auth.FailedLogins).
func RequireCredential(au *auth.Authenticator, onRefused ...func(r *http.Request, err error)) runtime.ServeMuxOption {
	return runtime.WithMiddlewares(func(next runtime.HandlerFunc) runtime.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request, params map[string]string) {
			if au != nil && au.Enabled() {
				md := metadata.MD{}
				if v := r.Header.Values("Authorization"); len(v) > 0 {
					md.Set("authorization", v...)
				}
				if _, err := au.Credential(metadata.NewIncomingContext(r.Context(), md)); status.Code(err) == codes.Unauthenticated {
					if len(md.Get("authorization")) > 0 {
						for _, f := range onRefused {
							f(r, err)
						}
					}
					body, merr := protojson.MarshalOptions{UseProtoNames: true, EmitDefaultValues: true}.Marshal(status.Convert(err).Proto())
					if merr != nil {
						body = []byte(`{"code":16,"message":"unauthenticated","details":[]}`)
					}
					w.Header().Set("Content-Type", "application/json")
					w.Header().Set("WWW-Authenticate", "Bearer")
					w.WriteHeader(http.StatusUnauthorized)
					_, _ = w.Write(body)
					return
				}
			}
			next(w, r, params)
		}
	})
}

// errorBodyMarshaler makes a streaming call's error the same JSON body as a
// unary call's ({"code", "message", "details"}, docs/architecture.md §2): the
// gateway wraps stream errors as {"error": <status>}, which this unwraps.
// Stream results stay {"result": <message>}, one per line.
type errorBodyMarshaler struct {
	*runtime.JSONPb
}

// Marshal marshals v, unwrapping the gateway's stream error chunk.
func (m errorBodyMarshaler) Marshal(v any) ([]byte, error) {
	if chunk, ok := v.(map[string]proto.Message); ok && len(chunk) == 1 {
		if st, ok := chunk["error"]; ok {
			return m.JSONPb.Marshal(st)
		}
	}
	return m.JSONPb.Marshal(v)
}

func headerMatcher(key string) (string, bool) {
	switch strings.ToLower(key) {
	case "x-request-id":
		return "x-request-id", true
	case auth.ActingForHeader:
		return auth.ActingForHeader, true
	case auth.PrincipalHeader: // base64 on HTTP, decoded by the gateway (a "-bin" key)
		return auth.PrincipalHeader, true
	case "traceparent", "tracestate", "baggage": // W3C trace context, carried on by grpcx.Dial
		return strings.ToLower(key), true
	}
	return runtime.DefaultHeaderMatcher(textproto.CanonicalMIMEHeaderKey(key))
}

// Probe reports readiness: nil per ready service, an error per service that is not.
type Probe interface {
	// Live reports whether the process serves at all.
	Live(ctx context.Context) bool
	// Ready returns one entry per selected service.
	Ready(ctx context.Context) map[string]error
}

// Handler serves the gateway mux plus the operational endpoints.
func Handler(mux http.Handler, probe Probe, gatherer prometheus.Gatherer) http.Handler {
	h := http.NewServeMux()
	h.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		if !probe.Live(r.Context()) {
			writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "NOT_SERVING"})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"status": "SERVING"})
	})
	h.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		res := probe.Ready(r.Context())
		code := http.StatusOK
		services := map[string]string{}
		var notReady []string
		for name, err := range res {
			if err != nil {
				services[name] = err.Error()
				notReady = append(notReady, name)
				code = http.StatusServiceUnavailable
			} else {
				services[name] = "ready"
			}
		}
		sort.Strings(notReady)
		body := map[string]any{"ready": code == http.StatusOK, "services": services}
		if len(notReady) > 0 {
			body["not_ready"] = notReady
		}
		writeJSON(w, code, body)
	})
	h.Handle("GET /metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))
	h.HandleFunc("GET /openapi.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(OpenAPI)
	})
	for _, p := range []string{"/healthz", "/readyz", "/metrics", "/openapi.json"} {
		h.Handle(p, methodOnly("GET, HEAD"))
	}
	h.Handle("/", mux)
	return h
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// BodyLimits are the REST request-body bounds per route class
// (server.http; docs/architecture.md §5, "Bounded cost").
type BodyLimits struct {
	// Default bounds every route not in a class below (server.http.max_body_bytes).
	Default int64
	// ToolCall bounds the tool-call routes (server.http.tool_call_max_body_bytes).
	ToolCall int64
	// Upload bounds the skill-archive routes (server.http.upload_max_body_bytes).
	Upload int64
	// UploadInFlight caps the skill-archive requests served at once
	// (server.http.upload_max_in_flight; 0 = no cap): each costs several
	// times its body in memory while decoded, copied and scanned, so the cap
	// is what bounds the process's memory under concurrent uploads.
	UploadInFlight int
}

// RouteClass names the body class of a REST request: "tool_call",
// "upload" or "default", with the config key of its bound.
func RouteClass(method, path string) (class, key string) {
	switch {
	case strings.HasSuffix(path, ":executeToolCall"), strings.HasSuffix(path, ":executeToolCallStream"),
		strings.HasPrefix(path, "/v1/tools/") && (strings.HasSuffix(path, ":call") || strings.HasSuffix(path, ":callStream")):
		return "tool_call", "server.http.tool_call_max_body_bytes"
	case path == "/v1/skills:install", path == "/v1/skills:scan", path == "/v1/skills:review",
		method == http.MethodPatch && strings.HasPrefix(path, "/v1/skills/"):
		return "upload", "server.http.upload_max_body_bytes"
	}
	return "default", "server.http.max_body_bytes"
}

// ReasonRequestTooLarge is the ErrorInfo reason of a body over its bound.
const ReasonRequestTooLarge = "REQUEST_TOO_LARGE"

// ReasonTooManyUploads is the ErrorInfo reason of an upload refused because
// server.http.upload_max_in_flight uploads are being served.
const ReasonTooManyUploads = "TOO_MANY_UPLOADS"

// LimitBodies bounds every REST request body by its route class before
// the gateway decodes it: a Content-Length over the bound is refused at
// once, without reading the body; a body without Content-Length is read
// through a reader that fails after limit bytes, so at most limit+1 bytes
// are ever read (memory and time flat in the body size). Both answer
// INVALID_ARGUMENT (HTTP 400) with reason REQUEST_TOO_LARGE naming the key.
//
// An upload beyond l.UploadInFlight concurrent ones is refused at once,
// before its body is read: RESOURCE_EXHAUSTED (HTTP 429) with reason
// TOO_MANY_UPLOADS naming server.http.upload_max_in_flight and a RetryInfo.
func LimitBodies(l BodyLimits) runtime.ServeMuxOption {
	var uploads chan struct{}
	if l.UploadInFlight > 0 {
		uploads = make(chan struct{}, l.UploadInFlight)
	}
	// One caller must not hold every slot (slow bodies would shut everyone
	// else out): a credential gets at most half of them (at least one), and
	// an upload body must arrive within UploadReadTimeout.
	perCred := max(1, l.UploadInFlight/2)
	var credMu sync.Mutex
	byCred := map[string]int{}
	return runtime.WithMiddlewares(func(next runtime.HandlerFunc) runtime.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request, params map[string]string) {
			class, key := RouteClass(r.Method, r.URL.Path)
			limit := l.Default
			switch class {
			case "tool_call":
				limit = l.ToolCall
			case "upload":
				limit = l.Upload
				if uploads != nil && r.Body != nil && r.Body != http.NoBody {
					sum := sha256.Sum256([]byte(r.Header.Get("Authorization")))
					cred := string(sum[:])
					credMu.Lock()
					mine := byCred[cred]
					if mine < perCred {
						byCred[cred]++
					}
					credMu.Unlock()
					if mine >= perCred {
						w.Header().Set("Retry-After", "1")
						writeStatus(w, http.StatusTooManyRequests, tooManyUploads(l.UploadInFlight, fmt.Sprintf("this credential already has %d skill upload(s) in flight", perCred)))
						return
					}
					defer func() {
						credMu.Lock()
						if byCred[cred]--; byCred[cred] <= 0 {
							delete(byCred, cred)
						}
						credMu.Unlock()
					}()
					select {
					case uploads <- struct{}{}:
						defer func() { <-uploads }()
					default:
						w.Header().Set("Retry-After", "1")
						writeStatus(w, http.StatusTooManyRequests, tooManyUploads(l.UploadInFlight, fmt.Sprintf("%d skill uploads are being processed", l.UploadInFlight)))
						return
					}
					_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(UploadReadTimeout))
				}
			}
			if limit > 0 && r.Body != nil && r.Body != http.NoBody {
				msg := fmt.Sprintf("request body is larger than %s (%d bytes)", key, limit)
				if r.ContentLength > limit {
					writeStatus(w, http.StatusBadRequest, tooLarge(msg, key, limit))
					return
				}
				r.Body = &limitedBody{r: r.Body, left: limit, msg: msg}
			}
			next(w, r, params)
		}
	})
}

// UploadReadTimeout bounds the time a skill-archive body may take to
// arrive once its upload slot is taken (64 MiB at ≈ 550 KB/s).
const UploadReadTimeout = 2 * time.Minute

func tooManyUploads(n int, why string) *status.Status {
	st := status.New(codes.ResourceExhausted, why+" (server.http.upload_max_in_flight); retry shortly")
	if d, err := st.WithDetails(&errdetails.ErrorInfo{Reason: ReasonTooManyUploads, Domain: auth.ErrorDomain,
		Metadata: map[string]string{"limit": "server.http.upload_max_in_flight", "max_in_flight": fmt.Sprint(n)}},
		&errdetails.RetryInfo{RetryDelay: durationpb.New(time.Second)}); err == nil {
		st = d
	}
	return st
}

func tooLarge(msg, key string, limit int64) *status.Status {
	st := status.New(codes.InvalidArgument, msg)
	if d, err := st.WithDetails(&errdetails.ErrorInfo{Reason: ReasonRequestTooLarge, Domain: auth.ErrorDomain,
		Metadata: map[string]string{"limit": key, "max_bytes": fmt.Sprint(limit)}}); err == nil {
		st = d
	}
	return st
}

// limitedBody fails once more than left bytes are read, with a message
// naming the limit (the gateway returns a decode error as INVALID_ARGUMENT
// with its text).
type limitedBody struct {
	r    io.ReadCloser
	left int64
	msg  string
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, errors.New(b.msg)
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return 0, errors.New(b.msg)
	}
	return n, err
}

func (b *limitedBody) Close() error { return b.r.Close() }
