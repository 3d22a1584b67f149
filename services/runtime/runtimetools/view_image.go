package runtimetools

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	_ "image/gif" // DecodeConfig of GIF images
	_ "image/jpeg"
	_ "image/png"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/toolplane/toolplane/services/runtime/runtimechain"
)

// view_image (docs/deerflow.md §1.6): bound when the turn's model has
// supports_vision. It reads an image from the thread's file system, checks
// its size and type (extension, magic bytes, and for PNG, JPEG and GIF the
// decoded header), and records it in the thread's viewed images; the agent
// loop sends recorded images to the model as image parts with the call's
// result (runtimeloop/images.go). Records live beside user-data
// (<thread>/viewed-images/), out of the agent's reach, so a later change to
// the file does not change what the model was shown.

// ViewImageMaxBytes is the largest image view_image accepts (the Anthropic
// Messages API's per-image limit; OpenAI's is larger).
const ViewImageMaxBytes = 5 << 20

// viewedImagesMax bounds the records kept per thread (the oldest go
// first): at most 16 × 5 MiB of images beside a thread's files.
const viewedImagesMax = 16

// imageTypes maps an extension to its MIME type.
var imageTypes = map[string]string{".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif", ".webp": "image/webp"}

// ViewedImage is one recorded image.
type ViewedImage struct {
	// CallID is the view_image call that viewed it.
	CallID string `json:"call_id"`
	// Path is the virtual path it was read from.
	Path string `json:"path"`
	// MIMEType is image/png, image/jpeg, image/gif or image/webp.
	MIMEType string `json:"mime_type"`
	// Data are the image bytes.
	Data []byte `json:"data"`
}

// sniffImage returns the MIME type the bytes are, by magic number ("" for
// none of the accepted types).
func sniffImage(b []byte) string {
	switch {
	case bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")):
		return "image/png"
	case bytes.HasPrefix(b, []byte{0xFF, 0xD8, 0xFF}):
		return "image/jpeg"
	case bytes.HasPrefix(b, []byte("GIF87a")), bytes.HasPrefix(b, []byte("GIF89a")):
		return "image/gif"
	case len(b) >= 12 && bytes.Equal(b[:4], []byte("RIFF")) && bytes.Equal(b[8:12], []byte("WEBP")):
		return "image/webp"
	}
	return ""
}

// viewImage implements view_image {image_path}.
func (s *Dispatcher) viewImage(_ context.Context, ec *runtimechain.Call) (*runtimechain.Outcome, error) {
	p := strings.TrimSpace(strArg(ec.Args, "image_path"))
	clean, rel, err := CleanVirtual(p, false)
	if err != nil {
		return nil, err
	}
	ext := strings.ToLower(path.Ext(clean))
	want, ok := imageTypes[ext]
	if !ok {
		return nil, runtimechain.Business("%s: unsupported image type %q (use .png, .jpg, .jpeg, .gif or .webp)", clean, ext)
	}
	r, err := s.ws.Root(ec.ThreadID())
	if err != nil {
		return nil, err
	}
	defer r.Close()
	fi, err := r.Lstat(rel)
	if err != nil {
		return nil, fsErr(clean, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, runtimechain.Business("%s is not a regular file (symbolic links are not followed)", clean)
	}
	if fi.Size() > ViewImageMaxBytes {
		return nil, runtimechain.Business("%s is %d bytes; view_image accepts at most %d bytes", clean, fi.Size(), ViewImageMaxBytes)
	}
	if fi.Size() == 0 {
		return nil, runtimechain.Business("%s is empty", clean)
	}
	f, err := r.Open(rel)
	if err != nil {
		return nil, fsErr(clean, err)
	}
	data := make([]byte, fi.Size()+1)
	n, _ := readFull(f, data)
	f.Close()
	if int64(n) != fi.Size() {
		return nil, runtimechain.Business("%s changed while it was read; try again", clean)
	}
	data = data[:n]
	got := sniffImage(data)
	if got == "" {
		return nil, runtimechain.Business("%s is not a PNG, JPEG, GIF or WebP image (its first bytes match none)", clean)
	}
	if got != want {
		return nil, runtimechain.Business("%s is named %s but holds %s data", clean, ext, got)
	}
	dims := ""
	if got != "image/webp" {
		cfg, _, err := image.DecodeConfig(bytes.NewReader(data))
		if err != nil {
			return nil, runtimechain.Business("%s is not a valid %s image: %v", clean, got, err)
		}
		dims = fmt.Sprintf(", %d×%d", cfg.Width, cfg.Height)
	}
	if err := s.ws.RecordViewedImage(ec.ThreadID(), &ViewedImage{CallID: ec.CallID, Path: clean, MIMEType: got, Data: data}); err != nil {
		return nil, fmt.Errorf("record viewed image: %w", err)
	}
	return &runtimechain.Outcome{Text: fmt.Sprintf("Successfully read image %s (%s, %d bytes%s); it is shown to you with this result.", clean, got, len(data), dims)}, nil
}

func readFull(f fs.File, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		k, err := f.Read(b[n:])
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

func (w *Workspace) viewedDir(threadID string) string {
	return filepath.Join(w.ThreadDir(threadID), "viewed-images")
}

func viewedName(callID string) string {
	h := sha256.Sum256([]byte(callID))
	return hex.EncodeToString(h[:16]) + ".json"
}

// RecordViewedImage stores im as viewed in the thread (atomically: a
// temporary file renamed into place), keeping at most viewedImagesMax records.
func (w *Workspace) RecordViewedImage(threadID string, im *ViewedImage) error {
	if !safeThreadID(threadID) {
		return fmt.Errorf("invalid thread id")
	}
	dir := w.viewedDir(threadID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	b, err := json.Marshal(im)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, viewedName(im.CallID))); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) <= viewedImagesMax {
		return nil
	}
	type rec struct {
		name string
		mod  int64
	}
	var recs []rec
	for _, e := range ents {
		if info, err := e.Info(); err == nil && strings.HasSuffix(e.Name(), ".json") {
			recs = append(recs, rec{e.Name(), info.ModTime().UnixNano()})
		}
	}
	sort.Slice(recs, func(i, j int) bool { return recs[i].mod < recs[j].mod })
	for _, r := range recs[:max(0, len(recs)-viewedImagesMax)] {
		os.Remove(filepath.Join(dir, r.name))
	}
	return nil
}

// ViewedImages returns the recorded images of the given view_image calls
// (calls without a record, e.g. pruned ones, are absent).
func (w *Workspace) ViewedImages(threadID string, callIDs []string) (map[string]*ViewedImage, error) {
	out := map[string]*ViewedImage{}
	if !safeThreadID(threadID) {
		return out, nil
	}
	for _, id := range callIDs {
		b, err := os.ReadFile(filepath.Join(w.viewedDir(threadID), viewedName(id)))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		var im ViewedImage
		if err := json.Unmarshal(b, &im); err != nil || im.CallID != id {
			continue
		}
		out[id] = &im
	}
	return out, nil
}

// safeThreadID reports a thread id usable as one path segment.
func safeThreadID(id string) bool {
	return id != "" && id != "." && id != ".." && !strings.ContainsAny(id, "/\\\x00")
}
