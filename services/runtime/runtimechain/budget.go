package runtimechain

import (
	"context"
	"fmt"
	"slices"
	"strings"

	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
)

// BudgetSettings is runtime.tool_output.
type BudgetSettings struct {
	// ExternalizeMinChars: longer text results are externalised; <= 0 disables.
	ExternalizeMinChars int
	// PreviewHeadChars and PreviewTailChars size the synopsis.
	PreviewHeadChars, PreviewTailChars int
	// ExemptTools are never externalised.
	ExemptTools []string
}

// OutputBudget is the output budget (docs/deerflow.md §6.2
// ToolOutputBudget): a text result longer than
// runtime.tool_output.externalize_min_chars is saved as a thread artifact
// and replaced by a head/tail synopsis naming the path, which read_file can
// page through. Non-text blocks are kept. It applies to every result of an
// assembled call, denials included.
type OutputBudget struct {
	Saver    ResultSaver
	Settings BudgetSettings
}

// Name implements Step.
func (OutputBudget) Name() string { return "output_budget" }

// Description implements Step.
func (OutputBudget) Description() string {
	return "long text results become a thread artifact plus a head/tail synopsis (runtime.tool_output)"
}

// Run implements Step.
func (s OutputBudget) Run(ctx context.Context, c *Call, next Next) (*Outcome, error) {
	o, err := next(ctx, c)
	if err != nil || o == nil {
		return o, err
	}
	s.apply(c, o)
	return o, nil
}

func (s OutputBudget) apply(c *Call, o *Outcome) {
	cfg := s.Settings
	limit := cfg.ExternalizeMinChars
	if limit <= 0 || slices.Contains(cfg.ExemptTools, c.Name) || c.View == nil {
		return
	}
	text := o.Text
	if o.Content != nil {
		text = TextOf(o.Content)
	}
	n := len([]rune(text))
	if n <= limit {
		return
	}
	name := c.Name
	if len(name) > 40 {
		name = name[:40]
	}
	head, tail := cfg.PreviewHeadChars, cfg.PreviewTailChars
	r := []rune(text)
	headText, tailText := string(r[:head]), string(r[n-tail:])
	if i := strings.LastIndexByte(headText, '\n'); i > head/2 {
		headText = headText[:i+1]
	}
	if i := strings.IndexByte(tailText, '\n'); i >= 0 && i < tail/2 {
		tailText = tailText[i+1:]
	}
	omitted := n - len([]rune(headText)) - len([]rune(tailText))
	var synopsis string
	a, err := s.Saver.SaveResult(c.ThreadID(), c.CallID, name, ".txt", text)
	if err == nil {
		lines := strings.Count(text, "\n") + 1
		synopsis = fmt.Sprintf("[The output of %s was %d characters (%d lines), over the output budget. The full text is saved at %s. Read it with read_file, using start_line/end_line to page through it.]\n--- head ---\n%s\n... [%d characters omitted] ...\n--- tail ---\n%s",
			c.Name, n, lines, a.Path, headText, omitted, tailText)
		o.Artifacts = append(o.Artifacts, a)
	} else {
		synopsis = fmt.Sprintf("%s\n... [%d characters omitted: the output could not be saved] ...\n%s", headText, omitted, tailText)
	}
	if o.Content == nil {
		o.Text = synopsis
		return
	}
	kept := []*typev1.ContentBlock{{Type: typev1.ContentBlockType_CONTENT_BLOCK_TYPE_TEXT, Text: synopsis}}
	for _, b := range o.Content {
		if b.GetType() != typev1.ContentBlockType_CONTENT_BLOCK_TYPE_TEXT {
			kept = append(kept, b)
		}
	}
	o.Content = kept
}
