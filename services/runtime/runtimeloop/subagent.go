package runtimeloop

import (
	"context"
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
)

// taskSchema is the task tool (docs/deerflow.md §1.6: description,
// prompt, subagent_type).
func (e *Engine) taskSchema() *runtimev1.ToolSchema {
	var types []any
	var lines []string
	for _, st := range e.cfg.Subagents.Types {
		types = append(types, st.Name)
		lines = append(lines, fmt.Sprintf("- %s: %s", st.Name, st.Description))
	}
	desc := "Delegate a self-contained task to a subagent that works in its own thread with its own tools and returns its result. " +
		fmt.Sprintf("At most %d tasks run at once and %d per turn. Subagent types:\n%s", e.cfg.Subagents.MaxConcurrent, e.cfg.Subagents.MaxTotal, strings.Join(lines, "\n"))
	params := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"description":   map[string]any{"type": "string", "description": "A short (3-5 words) description of the task."},
			"prompt":        map[string]any{"type": "string", "description": "The full task for the subagent, with every detail it needs."},
			"subagent_type": map[string]any{"type": "string", "enum": types, "description": "Which subagent runs the task."},
		},
		"required": []any{"description", "prompt", "subagent_type"},
	}
	oa, _ := structpb.NewStruct(map[string]any{"type": "function", "function": map[string]any{"name": ToolTask, "description": desc, "parameters": params}})
	an, _ := structpb.NewStruct(map[string]any{"name": ToolTask, "description": desc, "input_schema": params})
	return &runtimev1.ToolSchema{Name: ToolTask, Openai: oa, Anthropic: an, Source: "builtin"}
}

// limitTasks keeps the first min(max_concurrent, max_total − used) task
// calls of a response; other tool calls are untouched
// (docs/deerflow.md §6.2 SubagentLimit). It returns the kept calls and a
// note for the assistant text when some were dropped.
func (t *turn) limitTasks(calls []*runtimev1.ToolCall) ([]*runtimev1.ToolCall, string) {
	if t.isSubagent || !t.agent.SubagentsEnabled {
		return calls, ""
	}
	s := t.e.cfg.Subagents
	allow := min(s.MaxConcurrent, s.MaxTotal-t.tasksUsed)
	if allow < 0 {
		allow = 0
	}
	var out []*runtimev1.ToolCall
	kept, dropped := 0, 0
	for _, c := range calls {
		if c.GetName() != ToolTask {
			out = append(out, c)
			continue
		}
		if kept < allow {
			kept++
			out = append(out, c)
			continue
		}
		dropped++
	}
	t.tasksUsed += kept
	if dropped == 0 {
		return out, ""
	}
	if s.MaxTotal-t.tasksUsed <= 0 {
		return out, fmt.Sprintf("[SUBAGENT LIMIT REACHED] %d task call(s) were not run: a turn may delegate at most %d tasks.", dropped, s.MaxTotal)
	}
	return out, fmt.Sprintf("[SUBAGENT LIMIT] %d task call(s) were not run: at most %d tasks run at once. Delegate them again after these finish.", dropped, s.MaxConcurrent)
}

// intersectSkills is the subagent skills allowlist (docs/deerflow.md
// §1.4): both set → the subagent's entries also in the parent's (subagent
// order); one set → that one; none → nil (all).
func intersectSkills(parent *typev1.StringList, sub []string) *typev1.StringList {
	switch {
	case parent == nil && sub == nil:
		return nil
	case parent == nil:
		return &typev1.StringList{Values: append([]string{}, sub...)}
	case sub == nil:
		return &typev1.StringList{Values: append([]string{}, parent.GetValues()...)}
	}
	out := &typev1.StringList{Values: []string{}}
	for _, s := range sub {
		if contains(parent.GetValues(), s) {
			out.Values = append(out.Values, s)
		}
	}
	return out
}

// runTask runs a task call as a child loop on a child thread of its own
// and returns the subagent's result as the call's result, with status.
func (t *turn) runTask(ctx context.Context, c *runtimev1.ToolCall) *runtimev1.ToolResult {
	f := c.GetArguments().GetFields()
	typ, prompt, desc := f["subagent_type"].GetStringValue(), f["prompt"].GetStringValue(), f["description"].GetStringValue()
	var st *SubagentType
	var names []string
	for i := range t.e.cfg.Subagents.Types {
		names = append(names, t.e.cfg.Subagents.Types[i].Name)
		if t.e.cfg.Subagents.Types[i].Name == typ {
			st = &t.e.cfg.Subagents.Types[i]
		}
	}
	if st == nil {
		return textResult(c, runtimev1.ToolCallStatus_TOOL_CALL_STATUS_ERROR, runtimev1.ErrorKind_ERROR_KIND_BUSINESS, "",
			fmt.Sprintf("Error: unknown subagent_type %q. Available types: %s.", typ, strings.Join(names, ", ")))
	}
	if strings.TrimSpace(prompt) == "" {
		return textResult(c, runtimev1.ToolCallStatus_TOOL_CALL_STATUS_ERROR, runtimev1.ErrorKind_ERROR_KIND_BUSINESS, "",
			"Error: the task has an empty prompt. Describe the task in full in `prompt`.")
	}
	skills := intersectSkills(t.agent.Skills, st.Skills)
	childID, err := t.e.d.Threads.CreateChildThread(ctx, ChildSpec{ParentThreadID: t.threadID, ParentRunID: t.run.GetRunId(), SubagentType: st.Name, Skills: skills})
	if err != nil {
		if ctx.Err() != nil {
			return cancelledResult(c, ctx)
		}
		return textResult(c, runtimev1.ToolCallStatus_TOOL_CALL_STATUS_ERROR, runtimev1.ErrorKind_ERROR_KIND_RUNTIME, "",
			"Task failed. Error: could not create the subagent's thread: "+boundErr(err))
	}
	e := t.e
	limits := e.cfg.Subagents.Limits
	if dl, ok := ctx.Deadline(); ok {
		if rem := time.Until(dl); limits.Deadline <= 0 || rem < limits.Deadline {
			limits.Deadline = rem
		}
	}
	now := e.d.Now()
	run := &runtimev1.Run{RunId: e.d.NewID(), ThreadId: childID, Status: runtimev1.RunStatus_RUN_STATUS_RUNNING, StartTime: timestamppb.New(now), Usage: &runtimev1.TokenUsage{}}
	child := e.newTurn(childID, run, Agent{Name: t.agent.Name, Model: t.agent.Model, Skills: skills}, limits, func(ev *runtimev1.RunEvent) {
		if n := ev.GetNotification(); n != nil {
			t.emit(&runtimev1.RunEvent{Event: &runtimev1.RunEvent_Notification{Notification: n}})
		}
	}, 0)
	child.isSubagent, child.subType, child.userText = true, st, prompt
	fail := func(reason string) *runtimev1.ToolResult {
		return textResult(c, runtimev1.ToolCallStatus_TOOL_CALL_STATUS_ERROR, runtimev1.ErrorKind_ERROR_KIND_RUNTIME, "", "Task failed. Error: "+reason)
	}
	if err := e.d.Store.PutRun(ctx, run); err != nil {
		return fail(e.storeFailure(ctx, childID, err))
	}
	user := &runtimev1.Message{Id: e.d.NewID(), Role: runtimev1.MessageRole_MESSAGE_ROLE_USER, Content: prompt, RunId: run.GetRunId(), CreateTime: timestamppb.New(now)}
	if err := e.d.Store.AppendMessages(ctx, childID, user); err != nil {
		return fail(e.storeFailure(ctx, childID, err))
	}
	model := st.Model
	if model == "" {
		model = t.modelName
	}
	child.drive(ctx, model)
	final := ""
	if msgs, err := e.d.Store.Messages(context.WithoutCancel(ctx), childID); err == nil {
		for i := len(msgs) - 1; i >= 0; i-- {
			if msgs[i].GetRole() == runtimev1.MessageRole_MESSAGE_ROLE_ASSISTANT && msgs[i].GetRunId() == run.GetRunId() && len(msgs[i].GetToolCalls()) == 0 {
				final = msgs[i].GetContent()
				break
			}
		}
	}
	status := strings.ToLower(strings.TrimPrefix(child.run.GetStatus().String(), "RUN_STATUS_"))
	meta, _ := structpb.NewStruct(map[string]any{
		"subagent_status": status, "subagent_type": st.Name, "description": desc,
		"child_thread_id": childID, "child_run_id": run.GetRunId(), "stop_reason": child.run.GetReason(),
		"usage": map[string]any{"input_tokens": child.run.GetUsage().GetInputTokens(), "output_tokens": child.run.GetUsage().GetOutputTokens(),
			"total_tokens": child.run.GetUsage().GetTotalTokens()},
	})
	var r *runtimev1.ToolResult
	switch child.run.GetStatus() {
	case runtimev1.RunStatus_RUN_STATUS_COMPLETED:
		text := fmt.Sprintf("Task completed (subagent %s, thread %s).", st.Name, childID)
		if child.run.GetReason() != "" {
			text += " Stop reason: " + child.run.GetReason() + "."
		}
		r = textResult(c, runtimev1.ToolCallStatus_TOOL_CALL_STATUS_SUCCESS, 0, "", text+"\nResult:\n"+final)
	case runtimev1.RunStatus_RUN_STATUS_CANCELLED:
		r = textResult(c, runtimev1.ToolCallStatus_TOOL_CALL_STATUS_ERROR, runtimev1.ErrorKind_ERROR_KIND_RUNTIME, "run.cancelled", "Task cancelled. "+child.run.GetReason())
	default:
		r = fail(child.run.GetReason())
	}
	r.StructuredContent = meta
	return r
}
