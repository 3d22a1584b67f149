package runtimetools

import (
	"bytes"
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	"github.com/toolplane/toolplane/services/runtime/runtimeassembly"
	"github.com/toolplane/toolplane/services/runtime/runtimechain"
	"github.com/toolplane/toolplane/services/runtime/runtimestore"
)

var onePixelPNG, _ = base64.StdEncoding.DecodeString("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==")

func (f *searchFixture) viewImage(t *testing.T, callID, p string) (string, error) {
	t.Helper()
	tool := runtimeassembly.BuiltinDef(runtimeassembly.ViewImage)
	ec := &runtimechain.Call{
		Thread: &runtimestore.Thread{Proto: &runtimev1.Thread{ThreadId: "t1"}},
		View:   &runtimeassembly.View{Base: &runtimeassembly.Base{ByName: map[string]*runtimeassembly.Tool{tool.Name: tool}}},
		Name:   tool.Name, CallID: callID, Args: map[string]any{"image_path": p},
	}
	o, err := f.d.CallTool(context.Background(), ec)
	if err != nil {
		return "", err
	}
	return o.Text, nil
}

func TestViewImageChecksAndRecords(t *testing.T) {
	f := newSearchFixture(t)
	f.write(t, "uploads/chart.png", string(onePixelPNG))
	f.write(t, "uploads/fake.png", "#!/bin/sh\necho not an image\n")
	f.write(t, "uploads/jpeg-named.png", "\xFF\xD8\xFF\xE0 jfif")
	f.write(t, "uploads/notes.txt", "text")
	f.write(t, "uploads/broken.png", "\x89PNG\r\n\x1a\ngarbage")
	f.write(t, "uploads/big.png", "\x89PNG\r\n\x1a\n"+strings.Repeat("x", ViewImageMaxBytes))
	if err := os.WriteFile(filepath.Join(f.outside, "secret.png"), onePixelPNG, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(f.outside, "secret.png"), filepath.Join(f.userDir, "workspace", "link.png")); err != nil {
		t.Fatal(err)
	}

	txt, err := f.viewImage(t, "c1", "/mnt/user-data/uploads/chart.png")
	if err != nil || !strings.Contains(txt, "image/png, 70 bytes, 1×1") {
		t.Fatalf("view_image = %q, %v", txt, err)
	}
	for _, c := range []struct{ path, want string }{
		{"/mnt/user-data/uploads/fake.png", "not a PNG, JPEG, GIF or WebP"},
		{"/mnt/user-data/uploads/jpeg-named.png", "named .png but holds image/jpeg"},
		{"/mnt/user-data/uploads/notes.txt", "unsupported image type"},
		{"/mnt/user-data/uploads/broken.png", "not a valid image/png image"},
		{"/mnt/user-data/uploads/big.png", "at most 5242880 bytes"},
		{"/mnt/user-data/workspace/link.png", "not a regular file"},
		{"/mnt/user-data/../../etc/passwd.png", "outside /mnt/user-data"},
		{"/mnt/user-data/uploads/none.png", "does not exist"},
	} {
		_, err := f.viewImage(t, "bad", c.path)
		wantBusiness(t, err, c.want)
	}
	// Recorded for c1 only, outside user-data, unchanged by a later write.
	f.write(t, "uploads/chart.png", "overwritten")
	got, err := f.d.ws.ViewedImages("t1", []string{"c1", "bad", "missing"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got["c1"] == nil || !bytes.Equal(got["c1"].Data, onePixelPNG) || got["c1"].MIMEType != "image/png" || got["c1"].Path != "/mnt/user-data/uploads/chart.png" {
		t.Fatalf("viewed images = %+v", got)
	}
	if _, err := os.Stat(filepath.Join(f.d.ws.ThreadDir("t1"), "viewed-images")); err != nil {
		t.Fatalf("records not beside user-data: %v", err)
	}
	// Bounded: the oldest records go.
	for i := 0; i < viewedImagesMax+5; i++ {
		if err := f.d.ws.RecordViewedImage("t1", &ViewedImage{CallID: "k" + strings.Repeat("x", i), MIMEType: "image/png", Data: onePixelPNG}); err != nil {
			t.Fatal(err)
		}
	}
	ents, _ := os.ReadDir(filepath.Join(f.d.ws.ThreadDir("t1"), "viewed-images"))
	if len(ents) != viewedImagesMax {
		t.Fatalf("%d records kept, want %d", len(ents), viewedImagesMax)
	}
}
