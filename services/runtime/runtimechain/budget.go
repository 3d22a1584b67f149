package runtimechain

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"unicode/utf8"

	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
)

// BudgetSettings is runtime.tool_output.
type BudgetSettings struct {
	// ExternalizeMinChars is the budget: a result whose model-visible size
	// exceeds it is externalised (or, for an exempt tool, paged); <= 0
	// disables.
	ExternalizeMinChars int
	// PreviewHeadChars and PreviewTailChars size the synopsis.
	PreviewHeadChars, PreviewTailChars int
	// ExemptTools are never externalised; their results are still capped
	// to the budget (read_file pages).
	ExemptTools []string
}

// OutputBudget is the output budget (docs/deerflow.md §6.2
// ToolOutputBudget, docs/architecture.md §3.2). It counts every block the
// model will see: text, structuredContent (as its JSON), embedded
// resources, resource links, images and audio by their encoded size. When
// the text and structuredContent carry the same data the model gets the
// text only; a result of structuredContent alone gets its JSON as the text.
// Over the budget, the text (and a distinct structuredContent) is saved
// whole as a thread artifact and replaced by a head/tail synopsis naming
// the path; binary and resource blocks that do not fit are saved as
// artifacts and replaced by a line naming theirs. An exempt tool
// (read_file by default) is not externalised but its result is cut to the
// budget: read_file returns a page (whole lines, or a cut inside a line
// longer than a page) and says exactly which range it is and which
// start_line/start_char reads on. It applies to every result of an assembled call, denials included.
type OutputBudget struct {
	Saver    ResultSaver
	Settings BudgetSettings
}

// Name implements Step.
func (OutputBudget) Name() string { return "output_budget" }

// Description implements Step.
func (OutputBudget) Description() string {
	return "every content kind counts: over runtime.tool_output's budget a result becomes artifacts plus a synopsis; exempt tools are paged"
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
	limit := s.Settings.ExternalizeMinChars
	if limit <= 0 || c.View == nil {
		return
	}
	if o.Content == nil {
		o.Content = []*typev1.ContentBlock{{Type: typev1.ContentBlockType_CONTENT_BLOCK_TYPE_TEXT, Text: o.Text}}
		defer func() {
			// Keep the plain-text form when only text remains.
			if len(o.Content) == 1 && o.Content[0].GetType() == typev1.ContentBlockType_CONTENT_BLOCK_TYPE_TEXT {
				o.Text, o.Content = o.Content[0].GetText(), nil
			}
		}()
	}
	structured := foldStructured(o)
	if ModelSize(o) <= limit {
		return
	}
	if slices.Contains(s.Settings.ExemptTools, c.Name) {
		capExempt(c, o, limit)
		return
	}
	s.externalise(c, o, structured, limit)
}

// foldStructured gives the model one of text and structuredContent: equal
// data → the text only; structuredContent alone → its JSON becomes the
// text. It returns the JSON of a structuredContent that stays distinct.
func foldStructured(o *Outcome) string {
	if o.Structured == nil {
		return ""
	}
	sj, err := json.Marshal(o.Structured.AsMap())
	if err != nil {
		return ""
	}
	text := TextOf(o.Content)
	if strings.TrimSpace(text) == "" {
		o.Content = append([]*typev1.ContentBlock{{Type: typev1.ContentBlockType_CONTENT_BLOCK_TYPE_TEXT, Text: string(sj)}}, withoutEmptyText(o.Content)...)
		o.Structured = nil
		return ""
	}
	var tv any
	if json.Unmarshal([]byte(text), &tv) == nil && reflect.DeepEqual(tv, o.Structured.AsMap()) {
		o.Structured = nil
		return ""
	}
	return string(sj)
}

func withoutEmptyText(bs []*typev1.ContentBlock) []*typev1.ContentBlock {
	var out []*typev1.ContentBlock
	for _, b := range bs {
		if b.GetType() == typev1.ContentBlockType_CONTENT_BLOCK_TYPE_TEXT && b.GetText() == "" {
			continue
		}
		out = append(out, b)
	}
	return out
}

// ModelSize is what the outcome puts in the model's context, in
// characters: text by runes, other blocks by their encoded size,
// structuredContent by its JSON.
func ModelSize(o *Outcome) int {
	n := 0
	if o.Content == nil {
		n = utf8.RuneCountInString(o.Text)
	}
	for _, b := range o.Content {
		n += blockSize(b)
	}
	if o.Structured != nil {
		if sj, err := json.Marshal(o.Structured.AsMap()); err == nil {
			n += len(sj)
		}
	}
	return n
}

func blockSize(b *typev1.ContentBlock) int {
	return utf8.RuneCountInString(b.GetText()) + len(b.GetData()) + len(b.GetBlob()) + len(b.GetUri()) + len(b.GetName()) +
		len(b.GetTitle()) + len(b.GetDescription())
}

func isText(b *typev1.ContentBlock) bool {
	return b.GetType() == typev1.ContentBlockType_CONTENT_BLOCK_TYPE_TEXT
}

func (s OutputBudget) externalise(c *Call, o *Outcome, structured string, limit int) {
	name := c.Name
	if len(name) > 40 {
		name = name[:40]
	}
	text := TextOf(o.Content)
	full := pageableJSON(text, limit)
	if structured != "" {
		full = strings.TrimRight(full, "\n") + "\n--- structuredContent ---\n" + pageableJSON(structured, limit)
	}
	var others []*typev1.ContentBlock
	for _, b := range o.Content {
		if !isText(b) {
			others = append(others, b)
		}
	}
	out := []*typev1.ContentBlock{}
	used := utf8.RuneCountInString(full)
	othersSize := 0
	for _, b := range others {
		othersSize += blockSize(b)
	}
	if used > limit || used+othersSize > limit && used > s.Settings.PreviewHeadChars+s.Settings.PreviewTailChars {
		syn := s.synopsis(c, o, name, full)
		out = append(out, &typev1.ContentBlock{Type: typev1.ContentBlockType_CONTENT_BLOCK_TYPE_TEXT, Text: syn})
		o.Structured = nil
		used = utf8.RuneCountInString(syn)
	} else if full != "" {
		out = append(out, &typev1.ContentBlock{Type: typev1.ContentBlockType_CONTENT_BLOCK_TYPE_TEXT, Text: text})
	}
	for _, b := range others {
		if used+blockSize(b) <= limit {
			out = append(out, b)
			used += blockSize(b)
			continue
		}
		note := s.saveBlock(c, o, name, b)
		out = append(out, &typev1.ContentBlock{Type: typev1.ContentBlockType_CONTENT_BLOCK_TYPE_TEXT, Text: note})
		used += utf8.RuneCountInString(note)
	}
	o.Content = out
}

// synopsis saves full and returns the head/tail synopsis naming its path.
func (s OutputBudget) synopsis(c *Call, o *Outcome, name, full string) string {
	cfg := s.Settings
	r := []rune(full)
	n := len(r)
	head, tail := min(cfg.PreviewHeadChars, n), min(cfg.PreviewTailChars, n)
	if head+tail > n {
		tail = n - head
	}
	headText, tailText := string(r[:head]), string(r[n-tail:])
	if i := strings.LastIndexByte(headText, '\n'); i > head/2 {
		headText = headText[:i+1]
	}
	if i := strings.IndexByte(tailText, '\n'); i >= 0 && i < tail/2 {
		tailText = tailText[i+1:]
	}
	omitted := n - utf8.RuneCountInString(headText) - utf8.RuneCountInString(tailText)
	a, err := s.Saver.SaveResult(c.ThreadID(), c.CallID, name, ".txt", full)
	if err != nil {
		return fmt.Sprintf("%s\n... [%d characters omitted: the output could not be saved] ...\n%s", headText, omitted, tailText)
	}
	o.Artifacts = append(o.Artifacts, a)
	lines := strings.Count(full, "\n") + 1
	return fmt.Sprintf("[The output of %s is over the output budget: %d characters (%d lines) as saved. The full text is saved at %s. Read it with read_file: each call returns at most %d characters and ends with the exact call that reads on (start_line, and start_char within a long line).]\n--- head ---\n%s\n... [%d characters omitted] ...\n--- tail ---\n%s",
		c.Name, n, lines, a.Path, s.Settings.ExternalizeMinChars, headText, omitted, tailText)
}

// pageableJSON returns s indented, one member or element per line, when s
// is a single JSON value on one line longer than the budget (a
// structuredContent folded into the text is such a line), so that the
// saved file pages by lines and can be searched by line; json.Indent keeps
// the value's bytes (key order, numbers) as they came. Anything else is
// returned unchanged (docs/decisions/0095-read-file-pages-within-a-line.md).
func pageableJSON(s string, limit int) string {
	t := strings.TrimSpace(s)
	if len(t) <= limit || strings.Contains(t, "\n") || (t[0] != '{' && t[0] != '[') {
		return s
	}
	var b bytes.Buffer
	if err := json.Indent(&b, []byte(t), "", " "); err != nil {
		return s
	}
	b.WriteByte('\n')
	return b.String()
}

// saveBlock saves a block that does not fit and returns the line the
// model gets instead.
func (s OutputBudget) saveBlock(c *Call, o *Outcome, name string, b *typev1.ContentBlock) string {
	kind := strings.ToLower(strings.TrimPrefix(b.GetType().String(), "CONTENT_BLOCK_TYPE_"))
	var body string
	ext := ".txt"
	switch {
	case b.GetData() != "" || b.GetBlob() != "":
		enc := b.GetData() + b.GetBlob()
		raw, err := base64.StdEncoding.DecodeString(enc)
		if err != nil {
			raw = []byte(enc)
		} else {
			ext = extOf(b.GetMimeType())
		}
		body = string(raw)
	default:
		body = b.GetText()
		if body == "" {
			body = b.GetUri()
		}
	}
	size := blockSize(b)
	a, err := s.Saver.SaveResult(c.ThreadID(), c.CallID, name, ext, body)
	if err != nil {
		return fmt.Sprintf("[A %s block of %s (%d characters encoded) was left out: over the output budget, and it could not be saved.]", kind, mimeOr(b), size)
	}
	o.Artifacts = append(o.Artifacts, a)
	return fmt.Sprintf("[A %s block of %s (%d characters encoded) is over the output budget; it is saved at %s.]", kind, mimeOr(b), size, a.Path)
}

func mimeOr(b *typev1.ContentBlock) string {
	if m := b.GetMimeType(); m != "" {
		return m
	}
	return "unknown type"
}

func extOf(mime string) string {
	switch mime {
	case "image/png":
		return ".png"
	case "image/jpeg":
		return ".jpg"
	case "image/gif":
		return ".gif"
	case "image/webp":
		return ".webp"
	case "audio/wav", "audio/x-wav":
		return ".wav"
	case "audio/mpeg":
		return ".mp3"
	case "application/pdf":
		return ".pdf"
	case "application/json":
		return ".json"
	}
	return ".bin"
}

// capExempt cuts an exempt tool's result to the budget without saving it:
// whole lines where it can, a pointer to the next page for read_file.
func capExempt(c *Call, o *Outcome, limit int) {
	const reserve = 300 // room for the note
	keep := max(limit-reserve, limit/2)
	text := TextOf(o.Content)
	cut, total := prefixRunes(text, keep)
	var note string
	switch {
	case len(cut) == len(text):
	case c.Name == "read_file":
		cut, note = readFilePage(c.Args, text, keep, limit)
	default:
		if i := strings.LastIndexByte(cut, '\n'); i > 0 {
			cut = cut[:i+1]
		}
		note = fmt.Sprintf("\n[Output cut at %d of %d characters: over the output budget.]", utf8.RuneCountInString(cut), total)
	}
	out := []*typev1.ContentBlock{{Type: typev1.ContentBlockType_CONTENT_BLOCK_TYPE_TEXT, Text: cut + note}}
	used := utf8.RuneCountInString(cut + note)
	for _, b := range o.Content {
		if isText(b) {
			continue
		}
		if used+blockSize(b) <= limit {
			out = append(out, b)
			used += blockSize(b)
			continue
		}
		line := fmt.Sprintf("[A %s block of %s (%d characters encoded) was left out: over the output budget.]",
			strings.ToLower(strings.TrimPrefix(b.GetType().String(), "CONTENT_BLOCK_TYPE_")), mimeOr(b), blockSize(b))
		out = append(out, &typev1.ContentBlock{Type: typev1.ContentBlockType_CONTENT_BLOCK_TYPE_TEXT, Text: line})
		used += len(line)
	}
	o.Structured = nil
	o.Content = out
}

// prefixRunes returns the first n characters of s and the number of
// characters in s, without converting the whole of s to runes.
func prefixRunes(s string, n int) (string, int) {
	i, k := 0, 0
	for i < len(s) && k < n {
		_, sz := utf8.DecodeRuneInString(s[i:])
		i += sz
		k++
	}
	if i == len(s) {
		return s, k
	}
	return s[:i], k + utf8.RuneCountInString(s[i:])
}

// readFilePage cuts one read_file page of at most keep characters (plus
// one newline) from text, the result of read_file with args, and returns
// it with the note that names exactly what the page holds and the call
// that reads on. Whole lines are kept when the last newline falls in the
// second half of the page; otherwise the page ends inside a line, at a
// character boundary, and the note gives start_char. Positions are
// 1-based lines and 0-based characters (Unicode code points) within a
// line, as read_file takes them, so following the notes from the start
// reads the file to its end and a note never points outside it.
func readFilePage(args map[string]any, text string, keep, limit int) (page, note string) {
	first, firstChar := 1, 0
	if v, ok := args["start_line"].(float64); ok && v >= 1 {
		first = int(v)
	}
	if v, ok := args["start_char"].(float64); ok && v >= 1 {
		firstChar = int(v)
	}
	cut, _ := prefixRunes(text, keep)
	if len(cut) == len(text) {
		return text, ""
	}
	if text[len(cut)] == '\n' {
		cut = text[:len(cut)+1] // the line ends here: keep its newline
	} else if i := strings.LastIndexByte(cut, '\n'); i >= len(cut)/2 {
		cut = cut[:i+1]
	}
	nl := strings.Count(cut, "\n")
	from := fmt.Sprintf("line %d", first)
	if firstChar > 0 {
		from += fmt.Sprintf(" from character %d", firstChar)
	}
	var what, next string
	if strings.HasSuffix(cut, "\n") {
		last := first + nl - 1
		switch {
		case firstChar == 0:
			what = fmt.Sprintf("lines %d-%d", first, last)
		case last == first:
			what = from + " to its end"
		default:
			what = fmt.Sprintf("%s through line %d", from, last)
		}
		next = fmt.Sprintf("start_line=%d", last+1)
		if firstChar > 0 {
			// Paging through a long line goes on with start_char, so the
			// loop guard keys these pages by their exact line.
			next += " and start_char=0"
		}
	} else {
		last := first + nl
		end := utf8.RuneCountInString(cut[strings.LastIndexByte(cut, '\n')+1:])
		if nl == 0 {
			end += firstChar
			what = fmt.Sprintf("line %d, characters %d-%d", first, firstChar, end-1)
		} else {
			what = fmt.Sprintf("%s through line %d character %d", from, last, end-1)
		}
		next = fmt.Sprintf("start_line=%d and start_char=%d", last, end)
	}
	if v, ok := args["end_line"].(float64); ok {
		next += fmt.Sprintf(" and end_line=%d", int(v))
	}
	return cut, fmt.Sprintf("\n[read_file returns at most %d characters per call: this is %s. Call read_file with %s to read on.]", limit, what, next)
}
