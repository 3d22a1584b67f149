package runtimeloop

import (
	"context"
	"encoding/base64"
	"strings"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
)

// Images viewed with view_image (docs/deerflow.md §1.6): the tool records
// the image in the thread's viewed images; on every later model call of a
// vision model the loop sends the images of the most recent successful
// view_image calls as image parts with their results — OpenAI-compatible
// models in one user message after the step's tool messages (tool messages
// carry text only), Anthropic models inside the call's tool_result block.
// The Responses API gets the same user message as input_image parts.
// Like DeerFlow's injected image message, they stay in the conversation for
// the rest of the thread, bounded per request.

// ToolViewImage is the view_image tool's name.
const ToolViewImage = "view_image"

// Bounds of the images sent with one model request: the most recent
// maxRequestImages view_image results, at most maxRequestImageBytes in
// all; older ones are left as their text result.
const (
	maxRequestImages     = 8
	maxRequestImageBytes = 20 << 20
)

// Image is one viewed image.
type Image struct {
	// Path is the virtual path it was read from.
	Path string
	// MIMEType is image/png, image/jpeg, image/gif or image/webp.
	MIMEType string
	// Data are the bytes.
	Data []byte
}

// ImageSource returns the images recorded by view_image calls (the
// runtime's thread workspace).
type ImageSource interface {
	// ViewedImages returns the images of the given call ids; calls without
	// a record are absent.
	ViewedImages(ctx context.Context, threadID string, callIDs []string) (map[string]*Image, error)
}

// Vision is implemented by models that accept image input.
type Vision interface {
	// SupportsVision reports runtime.loop.models[].supports_vision.
	SupportsVision() bool
}

// SupportsVision reports whether m accepts images.
func SupportsVision(m Model) bool {
	v, ok := m.(Vision)
	return ok && v.SupportsVision()
}

// SupportsVision implements Vision.
func (m *OpenAIModel) SupportsVision() bool { return m.spec.Vision }

// SupportsVision implements Vision.
func (m *AnthropicModel) SupportsVision() bool { return m.spec.Vision }

// SupportsVision implements Vision.
func (m *ResponsesModel) SupportsVision() bool { return m.spec.Vision }

// visionAllows reports whether the tool may be bound and run on this turn:
// view_image only with a vision model.
func (t *turn) visionAllows(name string) bool {
	return name != ToolViewImage || (t.model != nil && SupportsVision(t.model))
}

// attachImages fills req.Images for a vision model from the most recent
// successful view_image results in the request's history.
func (t *turn) attachImages(ctx context.Context, req *ModelRequest) {
	src := t.e.d.Images
	if src == nil || t.model == nil || !SupportsVision(t.model) {
		return
	}
	var ids []string
	for i := len(req.Messages) - 1; i >= 0 && len(ids) < maxRequestImages; i-- {
		m := req.Messages[i]
		if m.GetRole() == runtimev1.MessageRole_MESSAGE_ROLE_TOOL && m.GetName() == ToolViewImage &&
			m.GetStatus() == runtimev1.ToolCallStatus_TOOL_CALL_STATUS_SUCCESS && m.GetToolCallId() != "" {
			ids = append(ids, m.GetToolCallId())
		}
	}
	if len(ids) == 0 {
		return
	}
	imgs, err := src.ViewedImages(ctx, t.threadID, ids)
	if err != nil {
		t.e.d.Logger.WarnContext(ctx, "viewed images unavailable; the model sees the text results only", "thread", t.threadID, "err", err)
		return
	}
	total := 0
	for _, id := range ids { // newest first: the byte bound drops the oldest
		im := imgs[id]
		if im == nil || total+len(im.Data) > maxRequestImageBytes {
			continue
		}
		total += len(im.Data)
		if req.Images == nil {
			req.Images = map[string]*Image{}
		}
		req.Images[id] = im
	}
}

func dataURL(im *Image) string {
	return "data:" + im.MIMEType + ";base64," + base64.StdEncoding.EncodeToString(im.Data)
}

// openAIImageMessage is the user message carrying the images of one
// step's view_image results (an OpenAI tool message holds text only).
func openAIImageMessage(imgs []*Image) openai.ChatCompletionMessageParamUnion {
	parts := []openai.ChatCompletionContentPartUnionParam{openai.TextContentPart(viewedText(imgs))}
	for _, im := range imgs {
		parts = append(parts, openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: dataURL(im)}))
	}
	return openai.UserMessage(parts)
}

// trailingToolImages returns the images of the run of tool messages that
// ends prefix.
func trailingToolImages(req *ModelRequest, prefix []*runtimev1.Message) []*Image {
	if len(req.Images) == 0 {
		return nil
	}
	start := len(prefix)
	for start > 0 && prefix[start-1].GetRole() == runtimev1.MessageRole_MESSAGE_ROLE_TOOL {
		start--
	}
	var imgs []*Image
	for _, m := range prefix[start:] {
		if im := req.Images[m.GetToolCallId()]; im != nil {
			imgs = append(imgs, im)
		}
	}
	return imgs
}

func viewedText(imgs []*Image) string {
	paths := make([]string, len(imgs))
	for i, im := range imgs {
		paths[i] = im.Path
	}
	return "Images you viewed with view_image: " + strings.Join(paths, ", ")
}

// appendResponsesImages appends, when prefix ends with a run of tool
// messages, one user message item with their images (Responses API
// input_image parts with data URLs) after the function_call_output items.
func appendResponsesImages(input []any, req *ModelRequest, prefix []*runtimev1.Message) []any {
	imgs := trailingToolImages(req, prefix)
	if len(imgs) == 0 {
		return input
	}
	parts := []any{map[string]any{"type": "input_text", "text": viewedText(imgs)}}
	for _, im := range imgs {
		parts = append(parts, map[string]any{"type": "input_image", "image_url": dataURL(im), "detail": "auto"})
	}
	return append(input, map[string]any{"type": "message", "role": "user", "content": parts})
}

// appendOpenAIImages appends, when prefix ends with a run of tool
// messages, one user message with the images of those results.
func appendOpenAIImages(out []openai.ChatCompletionMessageParamUnion, req *ModelRequest, prefix []*runtimev1.Message) []openai.ChatCompletionMessageParamUnion {
	imgs := trailingToolImages(req, prefix)
	if len(imgs) == 0 {
		return out
	}
	return append(out, openAIImageMessage(imgs))
}

// anthropicImageContent is the image block of a view_image tool_result.
func anthropicImageContent(im *Image) anthropic.ToolResultBlockParamContentUnion {
	return anthropic.ToolResultBlockParamContentUnion{OfImage: &anthropic.ImageBlockParam{Source: anthropic.ImageBlockParamSourceUnion{
		OfBase64: &anthropic.Base64ImageSourceParam{Data: base64.StdEncoding.EncodeToString(im.Data), MediaType: anthropic.Base64ImageSourceMediaType(im.MIMEType)}}}}
}
