package runtimeloop

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	"github.com/toolplane/toolplane/services/runtime/runtimeloop/fakeanthropic"
	"github.com/toolplane/toolplane/services/runtime/runtimeloop/fakemodel"
	"github.com/toolplane/toolplane/services/runtime/runtimeloop/fakeresponses"
)

// pngBytes is a 1×1 PNG.
var pngBytes, _ = base64.StdEncoding.DecodeString("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==")

// fakeImages is an ImageSource holding one image per call id.
type fakeImages struct {
	mu    sync.Mutex
	byID  map[string]*Image
	any   *Image // returned for every id when set
	asked [][]string
}

func (f *fakeImages) ViewedImages(_ context.Context, _ string, ids []string) (map[string]*Image, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, slices.Clone(ids))
	out := map[string]*Image{}
	for _, id := range ids {
		if im := f.byID[id]; im != nil {
			out[id] = im
		} else if f.any != nil {
			out[id] = f.any
		}
	}
	return out, nil
}

func visionWorld() *world {
	w := newWorld()
	w.tools[ToolViewImage] = &fakeTool{run: func(_ context.Context, a map[string]any) (string, error) {
		return fmt.Sprintf("Successfully read image %v", a["image_path"]), nil
	}}
	return w
}

func visionEngine(t *testing.T, w *world, m Model, imgs ImageSource) *Engine {
	t.Helper()
	n := 0
	var mu sync.Mutex
	e, err := New(Config{}, Deps{Assembler: w, Executor: w, Authorizer: w, Store: w, Models: single(m), Threads: w, Images: imgs,
		NewID: func() string { mu.Lock(); defer mu.Unlock(); n++; return fmt.Sprintf("id%04d", n) }})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestViewImageOpenAIImagePart(t *testing.T) {
	for _, vision := range []bool{true, false} {
		t.Run(fmt.Sprintf("vision=%v", vision), func(t *testing.T) {
			s := fakemodel.New(
				fakemodel.Reply{ToolCalls: []fakemodel.Call{{ID: "v1", Name: ToolViewImage, Args: `{"image_path":"/mnt/user-data/uploads/a.png"}`}, {ID: "e1", Name: "echo", Args: `{"text":"hi"}`}}},
				fakemodel.Reply{Content: "A single pixel."},
				fakemodel.Reply{Content: "Still one pixel."},
			)
			defer s.Close()
			m, err := NewOpenAIModel(OpenAISpec{BaseURL: s.BaseURL(), Model: "vis", Vision: vision})
			if err != nil {
				t.Fatal(err)
			}
			w := visionWorld()
			imgs := &fakeImages{byID: map[string]*Image{"v1": {Path: "/mnt/user-data/uploads/a.png", MIMEType: "image/png", Data: pngBytes}}}
			e := visionEngine(t, w, m, imgs)
			for _, msg := range []string{"What is in a.png?", "And now?"} {
				run, err := e.RunTurn(context.Background(), TurnRequest{ThreadID: "t1", Message: msg}, (&recorder{}).sink)
				if err != nil || run.GetStatus() != runtimev1.RunStatus_RUN_STATUS_COMPLETED {
					t.Fatalf("run: %v %v (%s)", err, run.GetStatus(), run.GetReason())
				}
			}
			if p := s.Problems(); len(p) > 0 {
				t.Fatalf("the fake refused requests: %v", p)
			}
			reqs := s.Requests()
			if got := slices.Contains(reqs[0].ToolNames(), ToolViewImage); got != vision {
				t.Fatalf("view_image bound = %v on a model with vision %v (tools %v)", got, vision, reqs[0].ToolNames())
			}
			want := "data:image/png;base64," + base64.StdEncoding.EncodeToString(pngBytes)
			for ri, r := range reqs[1:] {
				var urls []string
				imageAt := -1
				for i, msg := range r.Messages {
					if u := msg.ImageURLs(); len(u) > 0 {
						urls, imageAt = append(urls, u...), i
					}
				}
				if !vision {
					if len(urls) != 0 {
						t.Fatalf("request %d to a model without vision carries images", ri+1)
					}
					// The call was refused by the loop, never run.
					if w.execs[ToolViewImage] != 0 {
						t.Fatalf("view_image ran %d times on a model without vision", w.execs[ToolViewImage])
					}
					continue
				}
				if len(urls) != 1 || urls[0] != want {
					t.Fatalf("request %d image parts = %d (%.60v), want the one PNG as a data URL", ri+1, len(urls), urls)
				}
				// After both tool messages of the step, as a user message
				// naming the path.
				im := r.Messages[imageAt]
				if im.Role != "user" || r.Messages[imageAt-1].Role != "tool" || r.Messages[imageAt-2].Role != "tool" || !strings.Contains(im.Text(), "/mnt/user-data/uploads/a.png") {
					t.Fatalf("request %d: image message at %d: role %s, text %q, previous %s", ri+1, imageAt, im.Role, im.Text(), r.Messages[imageAt-1].Role)
				}
			}
		})
	}
}

func TestViewImageAnthropicImageInToolResult(t *testing.T) {
	s := fakeanthropic.New(
		fakeanthropic.Reply{ToolUses: []fakeanthropic.ToolUse{{ID: "v1", Name: ToolViewImage, Input: `{"image_path":"/mnt/user-data/uploads/a.png"}`}}},
		fakeanthropic.Reply{Text: "A single pixel."},
	)
	defer s.Close()
	m, err := NewAnthropicModel(AnthropicSpec{BaseURL: s.BaseURL(), Model: "claude-vis", APIKey: "k", MaxRetries: -1, Vision: true})
	if err != nil {
		t.Fatal(err)
	}
	w := visionWorld()
	imgs := &fakeImages{byID: map[string]*Image{"v1": {Path: "/mnt/user-data/uploads/a.png", MIMEType: "image/png", Data: pngBytes}}}
	run, err := visionEngine(t, w, m, imgs).RunTurn(context.Background(), TurnRequest{ThreadID: "t1", Message: "What is in a.png?"}, (&recorder{}).sink)
	if err != nil || run.GetStatus() != runtimev1.RunStatus_RUN_STATUS_COMPLETED {
		t.Fatalf("run: %v %v (%s)", err, run.GetStatus(), run.GetReason())
	}
	if p := s.Problems(); len(p) > 0 {
		t.Fatalf("the fake refused requests: %v", p)
	}
	reqs := s.Requests()
	var found bool
	for _, msg := range reqs[1].Messages {
		for _, b := range msg.Content {
			if b.Type != "tool_result" || b.ToolUseID != "v1" {
				continue
			}
			for _, rb := range b.ResultBlocks() {
				if rb.Type == "image" && rb.Source.MediaType == "image/png" && rb.Source.Data == base64.StdEncoding.EncodeToString(pngBytes) {
					found = true
				}
			}
		}
	}
	if !found {
		t.Fatalf("the view_image tool_result carries no PNG image block: %+v", reqs[1].Messages)
	}
}

func TestViewImageResponsesInputImage(t *testing.T) {
	s := fakeresponses.New(
		fakeresponses.Reply{Calls: []fakeresponses.Call{{Name: ToolViewImage, Args: `{"image_path":"/mnt/user-data/uploads/a.png"}`}}},
		fakeresponses.Reply{Text: "A single pixel."},
	)
	defer s.Close()
	m, err := NewResponsesModel(ResponsesSpec{BaseURL: s.BaseURL(), Model: "vis", Vision: true})
	if err != nil {
		t.Fatal(err)
	}
	imgs := &fakeImages{any: &Image{Path: "/mnt/user-data/uploads/a.png", MIMEType: "image/png", Data: pngBytes}}
	run, err := visionEngine(t, visionWorld(), m, imgs).RunTurn(context.Background(), TurnRequest{ThreadID: "t1", Message: "What is in a.png?"}, (&recorder{}).sink)
	if err != nil || run.GetStatus() != runtimev1.RunStatus_RUN_STATUS_COMPLETED {
		t.Fatalf("run: %v %v (%s)", err, run.GetStatus(), run.GetReason())
	}
	if p := s.Problems(); len(p) > 0 {
		t.Fatalf("the fake refused requests: %v", p)
	}
	items, err := fakeresponses.DecodeInput(s.Requests()[1].Input)
	if err != nil {
		t.Fatal(err)
	}
	last := items[len(items)-1]
	want := "data:image/png;base64," + base64.StdEncoding.EncodeToString(pngBytes)
	if last.Type != "message" || last.Role != "user" || !strings.Contains(string(last.Content), want) || items[len(items)-2].Type != "function_call_output" {
		t.Fatalf("request 2 does not end with the image message after the output: %+v", items)
	}
}
