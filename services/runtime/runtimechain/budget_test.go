package runtimechain

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
	"github.com/toolplane/toolplane/services/runtime/runtimeassembly"
	"github.com/toolplane/toolplane/services/runtime/runtimestore"
)

type memSaver struct{ saved map[string]string }

func (m *memSaver) SaveResult(_, callID, prefix, ext, text string) (*runtimev1.Artifact, error) {
	p := fmt.Sprintf("/mnt/user-data/outputs/.tool-results/%s-%d%s", prefix, len(m.saved), ext)
	m.saved[p] = text
	return &runtimev1.Artifact{Path: p, Size: int64(len(text)), ToolCallId: callID}, nil
}

type fixedStep struct{ o *Outcome }

func (fixedStep) Name() string        { return "fixed" }
func (fixedStep) Description() string { return "answers with a fixed outcome" }
func (f fixedStep) Run(context.Context, *Call, Next) (*Outcome, error) {
	return f.o, nil
}

const budget = 12000

func runBudget(t *testing.T, name string, args map[string]any, o *Outcome) (*Outcome, *memSaver) {
	t.Helper()
	sv := &memSaver{saved: map[string]string{}}
	ch, err := New(OutputBudget{Saver: sv, Settings: BudgetSettings{ExternalizeMinChars: budget, PreviewHeadChars: 2000, PreviewTailChars: 1000, ExemptTools: []string{"read_file"}}}, fixedStep{o})
	if err != nil {
		t.Fatal(err)
	}
	c := &Call{Name: name, CallID: "c1", Args: args, Thread: &runtimestore.Thread{Proto: &runtimev1.Thread{ThreadId: "t1"}},
		View: &runtimeassembly.View{Base: &runtimeassembly.Base{}}}
	return ch.Run(context.Background(), c), sv
}

func bigStruct(t *testing.T, n int) *structpb.Struct {
	rows := make([]any, 0, n/50)
	for i := 0; len(rows)*50 < n; i++ {
		rows = append(rows, map[string]any{"id": float64(i), "name": fmt.Sprintf("row %08d of the report", i)})
	}
	s, err := structpb.NewStruct(map[string]any{"rows": rows})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A result of structuredContent alone (5 MB) is counted, saved whole and
// replaced by a synopsis.
func TestBudgetStructuredOnly(t *testing.T) {
	st := bigStruct(t, 5<<20)
	want, _ := json.Marshal(st.AsMap())
	o, sv := runBudget(t, "report", nil, &Outcome{Content: []*typev1.ContentBlock{}, Structured: st})
	if n := ModelSize(o); n > budget {
		t.Fatalf("model sees %d characters, budget %d", n, budget)
	}
	if o.Structured != nil || len(o.Artifacts) != 1 {
		t.Fatalf("structured result not saved whole: %d artifacts", len(o.Artifacts))
	}
	// Saved whole and pretty-printed, one member or element per line, so
	// read_file pages it by lines: compacted again it is the same JSON.
	saved := sv.saved[o.Artifacts[0].GetPath()]
	var compact bytes.Buffer
	if err := json.Compact(&compact, []byte(saved)); err != nil || compact.String() != string(want) {
		t.Fatalf("saved JSON is not the result (%v)", err)
	}
	if n := strings.Count(saved, "\n"); n < 4*len(st.GetFields()["rows"].GetListValue().GetValues()) {
		t.Fatalf("saved JSON has %d lines, want one per member", n)
	}
	if !strings.Contains(TextOf(o.Content), o.Artifacts[0].GetPath()) {
		t.Fatal("the synopsis does not name the path")
	}
	// Small: structuredContent alone becomes its JSON as text.
	small, _ := structpb.NewStruct(map[string]any{"ok": true})
	o, _ = runBudget(t, "report", nil, &Outcome{Structured: small})
	if o.Structured != nil || o.Text != `{"ok":true}` {
		t.Fatalf("small structured: %+v", o)
	}
}

// Text and structuredContent carrying the same data: the model gets one.
func TestBudgetOneOfTextAndStructured(t *testing.T) {
	st := bigStruct(t, 8000)
	j, _ := json.Marshal(st.AsMap())
	o, _ := runBudget(t, "report", nil, &Outcome{Content: []*typev1.ContentBlock{{Type: typev1.ContentBlockType_CONTENT_BLOCK_TYPE_TEXT, Text: string(j)}}, Structured: st})
	if o.Structured != nil || len(o.Artifacts) != 0 || TextOf(o.Content) != string(j) {
		t.Fatalf("duplicate: structured %v, artifacts %d", o.Structured != nil, len(o.Artifacts))
	}
	// Different data: both count (8,000 + 8,000 > 12,000) and both are saved.
	o, sv := runBudget(t, "report", nil, &Outcome{Content: []*typev1.ContentBlock{{Type: typev1.ContentBlockType_CONTENT_BLOCK_TYPE_TEXT, Text: strings.Repeat("summary line\n", 700)}}, Structured: st})
	if ModelSize(o) > budget || len(o.Artifacts) != 1 || !strings.Contains(sv.saved[o.Artifacts[0].GetPath()], "--- structuredContent ---\n"+string(j)) {
		t.Fatalf("distinct text and structured: size %d, %d artifacts", ModelSize(o), len(o.Artifacts))
	}
}

// Images, audio and embedded resources count by their encoded size.
func TestBudgetBinaryBlocks(t *testing.T) {
	img := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("\x89PNG", 1<<20)))
	o, sv := runBudget(t, "shot", nil, &Outcome{Content: []*typev1.ContentBlock{
		{Type: typev1.ContentBlockType_CONTENT_BLOCK_TYPE_TEXT, Text: "here is the picture"},
		{Type: typev1.ContentBlockType_CONTENT_BLOCK_TYPE_IMAGE, Data: img, MimeType: "image/png"},
		{Type: typev1.ContentBlockType_CONTENT_BLOCK_TYPE_AUDIO, Data: "AAAA", MimeType: "audio/wav"},
		{Type: typev1.ContentBlockType_CONTENT_BLOCK_TYPE_RESOURCE, Uri: "file:///big.log", Text: strings.Repeat("log\n", 5000)},
	}})
	if n := ModelSize(o); n > budget {
		t.Fatalf("model sees %d characters", n)
	}
	if len(o.Artifacts) != 2 || !strings.HasSuffix(o.Artifacts[0].GetPath(), ".png") || sv.saved[o.Artifacts[0].GetPath()] != strings.Repeat("\x89PNG", 1<<20) {
		t.Fatalf("artifacts %v", o.Artifacts)
	}
	txt := TextOf(o.Content)
	if !strings.HasPrefix(txt, "here is the picture") || !strings.Contains(txt, "image block of image/png") || !strings.Contains(txt, o.Artifacts[1].GetPath()) {
		t.Fatalf("text %q", txt)
	}
	kept := 0
	for _, b := range o.Content {
		if b.GetType() == typev1.ContentBlockType_CONTENT_BLOCK_TYPE_AUDIO {
			kept++
		}
	}
	if kept != 1 {
		t.Fatal("the small audio block that fits was not kept")
	}
}

// read_file is exempt from externalisation, not from the cap: a 20 MiB
// read returns at most the budget, whole lines, and where to read on.
func TestBudgetReadFilePaged(t *testing.T) {
	var sb strings.Builder
	for i := 1; sb.Len() < 20<<20; i++ {
		fmt.Fprintf(&sb, "line %07d of a twenty mebibyte file\n", i)
	}
	o, sv := runBudget(t, "read_file", map[string]any{"start_line": float64(501)}, &Outcome{Text: sb.String()})
	if len(sv.saved) != 0 || len(o.Artifacts) != 0 {
		t.Fatal("an exempt tool's result was externalised")
	}
	if n := ModelSize(o); n > budget {
		t.Fatalf("read_file returned %d characters, budget %d", n, budget)
	}
	m := strings.LastIndex(o.Text, "\n[read_file returns at most 12000 characters per call: this is lines 501-")
	if m < 0 {
		t.Fatalf("no paging note: %q", o.Text[len(o.Text)-300:])
	}
	lines := strings.Count(o.Text[:m], "\n")
	if want := fmt.Sprintf("this is lines 501-%d. Call read_file with start_line=%d to read on.]", 500+lines, 501+lines); !strings.HasSuffix(o.Text, want) {
		t.Fatalf("note %q, want it to end %q", o.Text[m:], want)
	}
	// A short read is untouched; another tool is cut with a note.
	o, _ = runBudget(t, "read_file", nil, &Outcome{Text: "short"})
	if o.Text != "short" {
		t.Fatalf("short read changed: %q", o.Text)
	}
}
