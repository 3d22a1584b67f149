package skills

import (
	"context"
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	skillsv1 "github.com/toolplane/toolplane/gen/go/toolplane/skills/v1"
	"github.com/toolplane/toolplane/internal/grpcx"
)

// TestValidationErrorDetails: the validator's refusal of a bad request of
// any RPC with fields to check is INVALID_ARGUMENT with an ErrorInfo of the
// skills domain and a google.rpc.BadRequest naming the field (proto field
// names) and a reason.
func TestValidationErrorDetails(t *testing.T) {
	s := newServer(t, "")
	const m = "/toolplane.skills.v1.SkillsService/X"
	long := strings.Repeat("q", maxQueryBytes+1)
	cases := []struct {
		name   string
		req    any
		reason string
		field  string
		why    string
	}{
		{"get without name", &skillsv1.GetSkillRequest{}, "ERROR_REASON_INVALID_REQUEST", "name", grpcx.ViolationRequired},
		{"delete a bad name", &skillsv1.DeleteSkillRequest{Name: "Bad Name"}, "ERROR_REASON_INVALID_REQUEST", "name", grpcx.ViolationInvalid},
		{"list an unknown category", &skillsv1.ListSkillsRequest{Category: 42}, "ERROR_REASON_INVALID_REQUEST", "category", grpcx.ViolationUnknownValue},
		{"rollback to version 0", &skillsv1.RollbackSkillRequest{Name: "a", Version: 0}, "ERROR_REASON_INVALID_REQUEST", "version", grpcx.ViolationOutOfRange},
		{"install without source", &skillsv1.InstallSkillRequest{}, "ERROR_REASON_INVALID_REQUEST", "source", grpcx.ViolationRequired},
		{"install an empty archive", &skillsv1.InstallSkillRequest{Source: &skillsv1.InstallSkillRequest_Archive{}}, "ERROR_REASON_INVALID_REQUEST", "archive", grpcx.ViolationRequired},
		{"install a file without path", &skillsv1.InstallSkillRequest{Source: &skillsv1.InstallSkillRequest_Files{Files: &skillsv1.InlineFiles{
			Files: []*skillsv1.SkillFile{{Path: "SKILL.md"}, {}}}}}, "ERROR_REASON_INVALID_REQUEST", "files.files[1].path", grpcx.ViolationRequired},
		{"update nothing", &skillsv1.UpdateSkillRequest{Name: "a"}, "ERROR_REASON_INVALID_REQUEST", "skill", grpcx.ViolationRequired},
		{"scan an unknown format", &skillsv1.ScanSkillRequest{Format: 9, Source: &skillsv1.ScanSkillRequest_Name{Name: "a"}}, "ERROR_REASON_INVALID_REQUEST", "format", grpcx.ViolationUnknownValue},
		{"review without source", &skillsv1.ReviewSkillPackageRequest{}, "ERROR_REASON_INVALID_REQUEST", "source", grpcx.ViolationRequired},
		{"describe a long query", &skillsv1.DescribeSkillsRequest{Query: long}, "ERROR_REASON_INVALID_REQUEST", "query", grpcx.ViolationTooLong},
		{"resolve a blank always-available name", &skillsv1.ResolveSkillPolicyRequest{AlwaysAvailable: []string{"x", " "}}, "ERROR_REASON_INVALID_REQUEST", "always_available[1]", grpcx.ViolationRequired},
		{"read a path escaping the skill", &skillsv1.ReadSkillFileRequest{Name: "a", Path: "../etc/passwd"}, "ERROR_REASON_BAD_PATH", "path", grpcx.ViolationInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := s.Validate(m, tc.req)
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("code %v (%v), want INVALID_ARGUMENT", status.Code(err), err)
			}
			ei, br := grpcx.ErrorDetails(err)
			if ei.GetDomain() != errorDomain || ei.GetReason() != tc.reason || ei.GetMetadata()["field"] != tc.field {
				t.Errorf("ErrorInfo %v, want %s/%s field %s", ei, errorDomain, tc.reason, tc.field)
			}
			if v := br.GetFieldViolations(); len(v) != 1 || v[0].GetField() != tc.field || v[0].GetReason() != tc.why || v[0].GetDescription() == "" {
				t.Errorf("BadRequest %v, want field %s reason %s", br, tc.field, tc.why)
			}
		})
	}
}

// TestUnknownErrorIsInternalWithCause: an error the mapping does not know
// (a store or file-system failure) is INTERNAL with ERROR_REASON_INTERNAL and
// a generic message; the cause is kept for the log, context errors stay
// what they are.
func TestUnknownErrorIsInternalWithCause(t *testing.T) {
	cause := errors.New("sqlite: database disk image is malformed (/data/skills.db)")
	err := toStatus(cause)
	ei, _ := grpcx.ErrorDetails(err)
	if status.Code(err) != codes.Internal || ei.GetReason() != "ERROR_REASON_INTERNAL" || ei.GetDomain() != errorDomain {
		t.Fatalf("got %v %v", err, ei)
	}
	if strings.Contains(status.Convert(err).Message(), "sqlite") || !errors.Is(grpcx.Cause(err), cause) {
		t.Fatalf("message %q / cause %v", status.Convert(err).Message(), grpcx.Cause(err))
	}
	if c := status.Code(toStatus(context.Canceled)); c != codes.Canceled {
		t.Fatalf("cancelled: %v", c)
	}
}

// TestErrorReasonEnumHoldsSharedReasons: the reasons the shared safety net
// uses by name exist in the skills ErrorReason enum.
func TestErrorReasonEnumHoldsSharedReasons(t *testing.T) {
	for _, r := range []string{grpcx.ReasonInternal, grpcx.ReasonInvalidRequest, grpcx.ReasonUnspecified} {
		if _, ok := skillsv1.ErrorReason_value[r]; !ok {
			t.Errorf("skills ErrorReason lacks %s", r)
		}
	}
}
