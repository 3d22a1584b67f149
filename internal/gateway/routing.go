package gateway

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/toolplane/toolplane/internal/grpcx"
)

// Routing answers of the REST gateway (docs/decisions/0062-rest-routing-errors.md):
//
//   - a path that some route serves, called with another method: 405 with an
//     Allow header listing the methods that serve it (the grpc-gateway
//     default is 501 UNIMPLEMENTED without Allow);
//   - a path variable holding ':' is refused with 400 INVALID_ARGUMENT, an
//     ErrorInfo ERROR_REASON_INVALID_REQUEST and a google.rpc.BadRequest
//     naming the field (violation INVALID; docs/decisions/0030-error-model.md).
//     Ids never contain ':', which starts a custom method
//     (`/v1/threads/{thread_id}:assemble`), so `GET /v1/threads/abc:assemble`
//     no longer reaches GetThread with the id "abc:assemble".
//
// Which methods serve a path is asked of the mux itself: the request is
// routed once per method with a probe marker in its context, and
// probeMiddleware (the outermost middleware, so no handler, credential
// check or RPC runs) records the match and returns.

// probeMethods are the methods http.yaml routes use, in the order Allow lists them.
var probeMethods = []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

type probeKey struct{}

// probe is the outcome of routing one probe request.
type probe struct{ matched bool }

// probeMiddleware ends a probe request once the mux has matched a route; a
// match whose path variables hold ':' does not count (colonMiddleware would
// refuse it). Other requests pass through.
func probeMiddleware(next runtime.HandlerFunc) runtime.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request, params map[string]string) {
		if p, ok := r.Context().Value(probeKey{}).(*probe); ok {
			_, bad := colonParam(params)
			p.matched = !bad
			return
		}
		next(w, r, params)
	}
}

// colonMiddleware refuses a path variable that contains ':'.
func colonMiddleware(mux func() *runtime.ServeMux) runtime.Middleware {
	return func(next runtime.HandlerFunc) runtime.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request, params map[string]string) {
			name, bad := colonParam(params)
			if !bad {
				next(w, r, params)
				return
			}
			desc := "must not contain ':' (a ':' suffix on the last path segment names a custom method, e.g. :assemble)"
			msg := fmt.Sprintf("%s: %s", name, desc)
			if allow := allowedMethods(mux(), r); len(allow) > 0 {
				msg += fmt.Sprintf("; %s is served for %s", r.URL.Path, strings.Join(allow, ", "))
			}
			err := grpcx.InvalidMessage(ErrorDomain, grpcx.ReasonInvalidRequest, msg, nil,
				grpcx.Violation{Field: name, Reason: grpcx.ViolationInvalid, Description: desc})
			st := status.Convert(err)
			writeStatus(w, http.StatusBadRequest, st)
		}
	}
}

// colonParam returns the name of the first (by name) path variable holding ':'.
func colonParam(params map[string]string) (string, bool) {
	names := make([]string, 0, len(params))
	for k, v := range params {
		if strings.Contains(v, ":") {
			names = append(names, k)
		}
	}
	if len(names) == 0 {
		return "", false
	}
	sort.Strings(names)
	return names[0], true
}

// allowedMethods routes r once per probe method and returns those whose
// route matches.
func allowedMethods(mux *runtime.ServeMux, r *http.Request) []string {
	if mux == nil {
		return nil
	}
	var allow []string
	for _, m := range probeMethods {
		p := &probe{}
		req := r.Clone(context.WithValue(r.Context(), probeKey{}, p))
		req.Method = m
		req.Body = http.NoBody
		req.ContentLength = 0
		// No form body and no override: the mux's POST→GET fallback and
		// X-HTTP-Method-Override must not change the method probed.
		req.Header = http.Header{}
		mux.ServeHTTP(discard{}, req)
		if p.matched {
			allow = append(allow, m)
		}
	}
	return allow
}

// routingErrorHandler answers 405 with Allow where the gateway's default
// answers 501; probe requests that match no route end here silently.
func routingErrorHandler(ctx context.Context, mux *runtime.ServeMux, m runtime.Marshaler, w http.ResponseWriter, r *http.Request, code int) {
	if _, ok := ctx.Value(probeKey{}).(*probe); ok {
		return
	}
	if code == http.StatusMethodNotAllowed {
		allow := allowedMethods(mux, r)
		if len(allow) == 0 {
			// Only routes whose variables would hold ':' matched.
			runtime.DefaultRoutingErrorHandler(ctx, mux, m, w, r, http.StatusNotFound)
			return
		}
		w.Header().Set("Allow", strings.Join(allow, ", "))
		writeStatus(w, http.StatusMethodNotAllowed, methodNotAllowed(r, strings.Join(allow, ", ")))
		return
	}
	runtime.DefaultRoutingErrorHandler(ctx, mux, m, w, r, code)
}

// ErrorDomain is the google.rpc.ErrorInfo domain of the gateway's own
// routing errors (they belong to no service; docs/decisions/0030-error-model.md).
const ErrorDomain = "toolplane.dev"

// methodNotAllowed is the status of a 405: UNIMPLEMENTED (the gateway's
// code for it) with an ErrorInfo whose metadata "allow" repeats the header.
func methodNotAllowed(r *http.Request, allow string) *status.Status {
	return grpcx.Status(codes.Unimplemented, ErrorDomain, grpcx.ReasonInvalidRequest, map[string]string{"allow": allow, "method": r.Method},
		fmt.Sprintf("method %s is not allowed on %s; allowed: %s", r.Method, r.URL.Path, allow))
}

// writeStatus writes st as the gateway's JSON error body ({"code",
// "message", "details"}) with the HTTP status httpCode.
func writeStatus(w http.ResponseWriter, httpCode int, st *status.Status) {
	body, err := protojson.MarshalOptions{UseProtoNames: true, EmitDefaultValues: true}.Marshal(st.Proto())
	if err != nil {
		body = []byte(fmt.Sprintf(`{"code":%d,"message":"%s","details":[]}`, st.Code(), http.StatusText(httpCode)))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(httpCode)
	_, _ = w.Write(body)
}

// discard is the ResponseWriter of probe requests.
type discard struct{}

func (discard) Header() http.Header         { return http.Header{} }
func (discard) Write(b []byte) (int, error) { return len(b), nil }
func (discard) WriteHeader(int)             {}

// methodOnly answers 405 with Allow for the operational endpoints
// (/healthz, /readyz, /metrics, /openapi.json) called with another method.
func methodOnly(allow string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", allow)
		writeStatus(w, http.StatusMethodNotAllowed, methodNotAllowed(r, allow))
	}
}
