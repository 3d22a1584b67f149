package runtimeassembly

import (
	"context"
	"fmt"
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	authzv1 "github.com/toolplane/toolplane/gen/go/toolplane/authz/v1"
	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	skillsv1 "github.com/toolplane/toolplane/gen/go/toolplane/skills/v1"
	"github.com/toolplane/toolplane/services/runtime/runtimeident"
	"github.com/toolplane/toolplane/services/runtime/runtimestore"
)

// SkillAccess checks that the principal may use a skill: in the agent's
// allowlist, installed, enabled and allowed by authz (skill/use is decided
// at listing time with FilterResources). It returns the skill, or a
// one-line explanation for the user.
func (s *Builder) SkillAccess(ctx context.Context, th *runtimestore.Thread, b *Base, name string) (*skillsv1.Skill, string) {
	if !inList(b.Agent.GetSkills(), name) {
		return nil, fmt.Sprintf("Skill /%s is not available for this agent.", name)
	}
	resp, err := s.skills.GetSkill(runtimeident.ActingFor(ctx), &skillsv1.GetSkillRequest{Name: name})
	if status.Code(err) == codes.NotFound {
		return nil, fmt.Sprintf("Skill /%s is not installed.", name)
	}
	if err != nil {
		return nil, fmt.Sprintf("Skill /%s could not be resolved right now (%s); try again later.", name, status.Code(err))
	}
	if !resp.GetSkill().GetEnabled() {
		return nil, fmt.Sprintf("Skill /%s is installed but disabled; enable it first.", name)
	}
	allowed, _, _, failOpen, err := s.filter(ctx, runtimeident.Principal(ctx), runtimeident.CallContext(th, b.Agent, "", ""), authzv1.ResourceType_RESOURCE_TYPE_SKILL, []string{name}, nil)
	if err != nil || failOpen {
		// Activation changes behaviour: never fail open.
		return nil, fmt.Sprintf("Skill /%s could not be authorized right now; try again later.", name)
	}
	if !allowed[name] {
		return nil, fmt.Sprintf("Skill /%s is not available to you.", name)
	}
	return resp.GetSkill(), ""
}

// activateSlash activates a skill for the thread from a `/name task`
// message (docs/deerflow.md §4.7). Failures are a one-line answer for the
// user (the caller then skips the model). Success replaces earlier
// slash activations and returns the activation prompt section.
func (s *Builder) activateSlash(ctx context.Context, th *runtimestore.Thread, b *Base, name, task string) (*runtimestore.Thread, *runtimev1.PromptSection, string, *runtimev1.ActiveSkill, error) {
	sk, answer := s.SkillAccess(ctx, th, b, name)
	if answer != "" {
		return th, nil, answer, nil, nil
	}
	file, err := s.skills.ReadSkillFile(runtimeident.ActingFor(ctx), &skillsv1.ReadSkillFileRequest{Name: name, Path: "SKILL.md"})
	if err != nil {
		return th, nil, fmt.Sprintf("Skill /%s could not be loaded safely (%s).", name, status.Code(err)), nil, nil
	}
	act := &runtimev1.ActiveSkill{Source: runtimev1.SkillActivationSource_SKILL_ACTIVATION_SOURCE_SLASH, Name: name,
		Path: SkillMDPath(sk), Digest: FirstNonEmpty(file.GetSkillDigest(), sk.GetDigest()), Time: timestamppb.New(s.now())}
	th, err = s.store.UpdateThread(ctx, th.Proto.GetThreadId(), func(t *runtimestore.Thread) ([]*runtimev1.Message, error) {
		t.Proto.ActiveSkills = slices.DeleteFunc(t.Proto.ActiveSkills, func(a *runtimev1.ActiveSkill) bool {
			return a.GetSource() == runtimev1.SkillActivationSource_SKILL_ACTIVATION_SOURCE_SLASH
		})
		t.Proto.ActiveSkills = append(t.Proto.ActiveSkills, act)
		return nil, nil
	})
	if err != nil {
		return nil, nil, "", nil, err
	}
	req := EscapeText(task)
	if task == "" {
		req = "(no task text: ask the user what to do with this skill if it is not clear)"
	}
	text := fmt.Sprintf("<slash_skill_activation>\nThe user activated the skill /%s for this request. Follow the skill's instructions.\n<user_request>%s</user_request>\n<skill name=\"%s\" category=\"%s\" path=\"%s\" sha256=\"%s\">\n%s\n</skill>\n</slash_skill_activation>",
		name, req, EscapeText(name), CategoryName(file.GetCategory()), EscapeText(act.Path), EscapeText(act.Digest), EscapeText(string(file.GetContent())))
	return th, &runtimev1.PromptSection{Name: "skill_activation", Text: text}, "", act, nil
}
