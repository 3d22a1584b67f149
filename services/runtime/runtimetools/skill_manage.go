package runtimetools

import (
	"context"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	skillsv1 "github.com/toolplane/toolplane/gen/go/toolplane/skills/v1"
	"github.com/toolplane/toolplane/services/runtime/runtimechain"
	"github.com/toolplane/toolplane/services/runtime/runtimeident"
)

var skillActions = map[string]skillsv1.SkillAction{
	"create":      skillsv1.SkillAction_SKILL_ACTION_CREATE,
	"edit":        skillsv1.SkillAction_SKILL_ACTION_EDIT,
	"patch":       skillsv1.SkillAction_SKILL_ACTION_PATCH,
	"write_file":  skillsv1.SkillAction_SKILL_ACTION_WRITE_FILE,
	"remove_file": skillsv1.SkillAction_SKILL_ACTION_REMOVE_FILE,
	"delete":      skillsv1.SkillAction_SKILL_ACTION_DELETE,
}

// skillManage implements skill_manage (docs/deerflow.md §4.14) through the
// skills service's ManageSkill, acting for the thread's user with the
// thread's call context (the history then names author "agent" and the
// thread). The skills service validates, scans, versions and serialises;
// its refusals are BUSINESS results the model can act on. A successful
// change invalidates the cached assemblies so the skill list is fresh on
// the next turn.
func (s *Dispatcher) skillManage(ctx context.Context, ec *runtimechain.Call) (*runtimechain.Outcome, error) {
	a := strings.TrimSpace(strArg(ec.Args, "action"))
	act, ok := skillActions[a]
	if !ok {
		return nil, runtimechain.Business("action must be one of create, edit, patch, write_file, remove_file, delete (got %q)", a)
	}
	req := &skillsv1.ManageSkillRequest{Action: act, Name: strings.TrimSpace(strArg(ec.Args, "name")), Content: strArg(ec.Args, "content"),
		Path: strings.TrimSpace(strArg(ec.Args, "path")), Find: strArg(ec.Args, "find"), Replace: strArg(ec.Args, "replace"),
		CallContext: runtimeident.CallContext(ec.Thread, ec.View.Base.Agent, ec.RunID, ec.CallID)}
	if n, ok := intArg(ec.Args, "expected_count"); ok {
		c := int32(n)
		req.ExpectedCount = &c
	}
	resp, err := s.skills.ManageSkill(runtimeident.ActingFor(ctx), req)
	if err != nil {
		switch status.Code(err) {
		case codes.InvalidArgument, codes.NotFound, codes.AlreadyExists, codes.FailedPrecondition, codes.PermissionDenied:
			return nil, runtimechain.Business("skill_manage %s %s refused: %s", a, req.GetName(), refusalText(err))
		}
		return nil, runtimechain.UpstreamFailure("skills", err)
	}
	if s.assembly != nil {
		s.assembly.Invalidate()
	}
	return &runtimechain.Outcome{Text: resp.GetMessage()}, nil
}

// refusalText is a skills refusal for the model: the message and, for a
// scan block, the rule ids.
func refusalText(err error) string {
	st := status.Convert(err)
	msg := st.Message()
	for _, d := range st.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok {
			if ids := ei.GetMetadata()["rule_ids"]; ids != "" && !strings.Contains(msg, ids) {
				msg += " (rules: " + ids + ")"
			}
		}
	}
	return msg
}
