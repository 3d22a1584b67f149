package catalog

import (
	"fmt"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/durationpb"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
	"github.com/toolplane/toolplane/internal/grpcx"
)

// Request limits enforced by Validate.
const (
	maxNameBytes   = 256
	maxQueryBytes  = 4096
	maxCandidates  = 100_000
	maxServers     = 1000
	maxCallTimeout = 24 * 3600 // seconds
)

// Validate checks a request before its handler runs (called by the shared
// validation interceptor). It returns a gRPC status error with
// INVALID_ARGUMENT naming the field and the reason, or nil.
func (s *Server) Validate(fullMethod string, req any) error {
	return validateRequest(fullMethod, req)
}

// invalid is INVALID_ARGUMENT with an ErrorInfo (ERROR_REASON_INVALID_REQUEST)
// and a google.rpc.BadRequest naming field and why (a grpcx.Violation* reason).
func invalid(field, why, format string, args ...any) error {
	return grpcx.Invalid(errorDomain, catalogv1.ErrorReason_ERROR_REASON_INVALID_REQUEST.String(),
		grpcx.Violation{Field: field, Reason: why, Description: fmt.Sprintf(format, args...)})
}

func checkName(field, v string) error {
	switch {
	case v == "":
		return invalid(field, grpcx.ViolationRequired, "required")
	case len(v) > maxNameBytes:
		return invalid(field, grpcx.ViolationTooLong, "longer than %d bytes", maxNameBytes)
	case !utf8.ValidString(v):
		return invalid(field, grpcx.ViolationInvalidUTF8, "not valid UTF-8")
	}
	return nil
}

func checkCandidates(field string, l *typev1.StringList) error {
	if l == nil {
		return nil
	}
	if len(l.GetValues()) > maxCandidates {
		return invalid(field, grpcx.ViolationTooMany, "more than %d names", maxCandidates)
	}
	for i, v := range l.GetValues() {
		if !utf8.ValidString(v) {
			return invalid(fmt.Sprintf("%s.values[%d]", field, i), grpcx.ViolationInvalidUTF8, "not valid UTF-8")
		}
	}
	return nil
}

// checkDefinitionHash requires a definition hash as Tool.definition_hash
// spells it: 64 lowercase hex characters.
func checkDefinitionHash(h string) error {
	if h == "" {
		return invalid("definition_hash", grpcx.ViolationRequired, "required (the Tool.definition_hash of the definition reviewed)")
	}
	if len(h) != 64 {
		return invalid("definition_hash", grpcx.ViolationInvalid, "must be 64 lowercase hex characters")
	}
	for i := 0; i < len(h); i++ {
		if c := h[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return invalid("definition_hash", grpcx.ViolationInvalid, "must be 64 lowercase hex characters")
		}
	}
	return nil
}

func checkTimeout(d *durationpb.Duration) error {
	if d == nil {
		return nil
	}
	if err := d.CheckValid(); err != nil {
		return invalid("timeout", grpcx.ViolationInvalid, "%v", err)
	}
	if d.AsDuration() < 0 || d.GetSeconds() > maxCallTimeout {
		return invalid("timeout", grpcx.ViolationOutOfRange, "must be between 0 and %d seconds", maxCallTimeout)
	}
	return nil
}

func validateRequest(_ string, req any) error {
	switch r := req.(type) {
	case *catalogv1.ListToolsRequest:
		if r.GetPageSize() < 0 {
			return invalid("page_size", grpcx.ViolationOutOfRange, "must be >= 0")
		}
	case *catalogv1.GetToolRequest:
		return checkName("name", r.GetName())
	case *catalogv1.SearchToolsRequest:
		if len(r.GetQuery()) > maxQueryBytes {
			return invalid("query", grpcx.ViolationTooLong, "longer than %d bytes", maxQueryBytes)
		}
		if !utf8.ValidString(r.GetQuery()) {
			return invalid("query", grpcx.ViolationInvalidUTF8, "not valid UTF-8")
		}
		if _, ok := catalogv1.SearchMode_name[int32(r.GetMode())]; !ok {
			return invalid("mode", grpcx.ViolationUnknownValue, "unknown value %d", r.GetMode())
		}
		if len(r.GetCandidateView()) > maxViewIDLen {
			return invalid("candidate_view", grpcx.ViolationTooLong, "longer than %d characters", maxViewIDLen)
		}
		return checkCandidates("candidates", r.GetCandidates())
	case *catalogv1.GetCatalogRequest:
		return checkCandidates("candidates", r.GetCandidates())
	case *catalogv1.CallToolRequest:
		if err := checkName("name", r.GetName()); err != nil {
			return err
		}
		return checkTimeout(r.GetTimeout())
	case *catalogv1.CallToolStreamRequest:
		if err := checkName("name", r.GetName()); err != nil {
			return err
		}
		return checkTimeout(r.GetTimeout())
	case *catalogv1.InvokeAcpAgentRequest:
		if err := checkName("agent", r.GetAgent()); err != nil {
			return err
		}
		switch p := r.GetPrompt(); {
		case p == "":
			return invalid("prompt", grpcx.ViolationRequired, "required")
		case len(p) > maxACPPromptBytes:
			return invalid("prompt", grpcx.ViolationTooLong, "longer than %d bytes", maxACPPromptBytes)
		case !utf8.ValidString(p):
			return invalid("prompt", grpcx.ViolationInvalidUTF8, "not valid UTF-8")
		}
		return checkTimeout(r.GetTimeout())
	case *catalogv1.GetServerRequest:
		return checkName("name", r.GetName())
	case *catalogv1.ListPendingToolsRequest:
		if r.GetPageSize() < 0 {
			return invalid("page_size", grpcx.ViolationOutOfRange, "must be >= 0")
		}
	case *catalogv1.ApproveToolRequest:
		if err := checkName("name", r.GetName()); err != nil {
			return err
		}
		return checkDefinitionHash(r.GetDefinitionHash())
	case *catalogv1.RejectToolRequest:
		if err := checkName("name", r.GetName()); err != nil {
			return err
		}
		return checkDefinitionHash(r.GetDefinitionHash())
	case *catalogv1.UpdateServerRequest:
		if err := checkName("name", r.GetName()); err != nil {
			return err
		}
		if r.GetServer() == nil {
			return invalid("server", grpcx.ViolationRequired, "required")
		}
	case *catalogv1.ReplaceServersRequest:
		if len(r.GetServers()) > maxServers {
			return invalid("servers", grpcx.ViolationTooMany, "more than %d servers", maxServers)
		}
		for i, c := range r.GetServers() {
			if err := checkName(fmt.Sprintf("servers[%d].name", i), c.GetName()); err != nil {
				return err
			}
		}
	}
	return nil
}
