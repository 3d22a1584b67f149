package skills

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	skillsv1 "github.com/toolplane/toolplane/gen/go/toolplane/skills/v1"
	"github.com/toolplane/toolplane/internal/grpcx"
	"github.com/toolplane/toolplane/services/skills/skillsarchive"
	"github.com/toolplane/toolplane/services/skills/skillsmd"
	"github.com/toolplane/toolplane/services/skills/skillsscan"
	"github.com/toolplane/toolplane/services/skills/skillsstore"
)

// errorDomain is the ErrorInfo domain of skills errors.
const errorDomain = "skills.toolplane.dev"

// statusErr builds a status error with a google.rpc.ErrorInfo whose reason is
// the skills ErrorReason name (docs/architecture.md §2, "Errors").
func statusErr(code codes.Code, reason skillsv1.ErrorReason, meta map[string]string, format string, args ...any) error {
	st := status.New(code, fmt.Sprintf(format, args...))
	if d, err := st.WithDetails(&errdetails.ErrorInfo{Reason: reason.String(), Domain: errorDomain, Metadata: meta}); err == nil {
		st = d
	}
	return st.Err()
}

func notFound(name string) error {
	return statusErr(codes.NotFound, skillsv1.ErrorReason_ERROR_REASON_SKILL_NOT_FOUND, map[string]string{"name": name},
		"skill %q not found", name)
}

func readOnly(name, category string) error {
	return statusErr(codes.FailedPrecondition, skillsv1.ErrorReason_ERROR_REASON_READ_ONLY,
		map[string]string{"name": name, "category": category},
		"skill %q is a %s skill and read-only; only your custom skills can be changed", name, category)
}

func permissionDenied(format string, args ...any) error {
	return statusErr(codes.PermissionDenied, skillsv1.ErrorReason_ERROR_REASON_PERMISSION_DENIED, nil, format, args...)
}

func badPath(code codes.Code, name, p, why string) error {
	if code == codes.InvalidArgument {
		// The request's path field is malformed: a field violation too.
		return grpcx.InvalidMeta(errorDomain, skillsv1.ErrorReason_ERROR_REASON_BAD_PATH.String(), map[string]string{"name": name, "path": p},
			grpcx.Violation{Field: "path", Reason: grpcx.ViolationInvalid, Description: fmt.Sprintf("skill %q: path %q: %s", name, p, why)})
	}
	return statusErr(code, skillsv1.ErrorReason_ERROR_REASON_BAD_PATH, map[string]string{"name": name, "path": p},
		"skill %q: path %q: %s", name, p, why)
}

func disabled(name string) error {
	return statusErr(codes.FailedPrecondition, skillsv1.ErrorReason_ERROR_REASON_SKILL_DISABLED, map[string]string{"name": name},
		"skill %q is disabled; enable it first", name)
}

func exists(name string) error {
	return statusErr(codes.AlreadyExists, skillsv1.ErrorReason_ERROR_REASON_SKILL_EXISTS, map[string]string{"name": name},
		"a skill named %q already exists; delete it or choose another name", name)
}

// scanBlockedError is returned when a CRITICAL finding blocks an operation.
type scanBlockedError struct {
	op     string
	report skillsscan.Report
}

func (e *scanBlockedError) Error() string {
	var ids []string
	for _, f := range e.report.Findings {
		if f.Severity == skillsscan.Critical {
			ids = append(ids, fmt.Sprintf("%s at %s:%d", f.RuleID, f.File, f.Line))
		}
	}
	return fmt.Sprintf("%s blocked by %d CRITICAL scan finding(s): %s", e.op, len(ids), strings.Join(ids, "; "))
}

// toStatus is the single mapping of domain errors to gRPC status errors.
// Status errors pass through; unknown errors (store, blob, file system)
// become INTERNAL "internal error" with ERROR_REASON_INTERNAL, the cause
// hidden from the caller and logged with the request id by the interceptor
// chain (docs/decisions/0030-error-model.md).
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	var fm *skillsmd.Error
	var ref *skillsarchive.RefusalError
	var blocked *scanBlockedError
	switch {
	case errors.As(err, &fm):
		meta := map[string]string{}
		if len(fm.Problems) > 0 {
			p := fm.Problems[0]
			meta["field"], meta["line"], meta["column"] = p.Field, strconv.Itoa(p.Line), strconv.Itoa(p.Column)
		}
		return statusErr(codes.InvalidArgument, skillsv1.ErrorReason_ERROR_REASON_INVALID_FRONTMATTER, meta, "%v", fm)
	case errors.As(err, &ref):
		return statusErr(codes.InvalidArgument, skillsv1.ErrorReason_ERROR_REASON_ARCHIVE_REFUSED,
			map[string]string{"code": "archive." + string(ref.Reason), "entry": ref.Entry}, "package refused: %v", ref)
	case errors.As(err, &blocked):
		var ids []string
		for _, f := range blocked.report.Findings {
			if f.Severity == skillsscan.Critical {
				ids = append(ids, f.RuleID)
			}
		}
		return statusErr(codes.FailedPrecondition, skillsv1.ErrorReason_ERROR_REASON_SCAN_BLOCKED,
			map[string]string{"rule_ids": strings.Join(ids, ","), "critical": strconv.Itoa(len(ids))}, "%v", blocked)
	case errors.Is(err, skillsstore.ErrAlreadyExists):
		return statusErr(codes.AlreadyExists, skillsv1.ErrorReason_ERROR_REASON_SKILL_EXISTS, nil, "skill already exists")
	case errors.Is(err, skillsstore.ErrNotFound):
		return statusErr(codes.NotFound, skillsv1.ErrorReason_ERROR_REASON_SKILL_NOT_FOUND, nil, "skill not found")
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return status.FromContextError(err).Err()
	}
	return grpcx.Internal(errorDomain, skillsv1.ErrorReason_ERROR_REASON_INTERNAL.String(), err)
}
