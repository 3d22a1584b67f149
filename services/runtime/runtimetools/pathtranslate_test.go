package runtimetools

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
)

func TestTranslatePaths(t *testing.T) {
	f := newSearchFixture(t)
	f.write(t, "workspace/a.txt", "a")
	f.write(t, "outputs/chart.png", "p")
	f.write(t, "workspace/sub/dup.md", "1")
	if err := os.Symlink(filepath.Join(f.outside, "secret"), filepath.Join(f.userDir, "workspace", "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.outside, "secret"), []byte("s"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The catalog sees the thread's folder under another mount point.
	croot := "/srv/catalog/threads/t1/user-data"
	wd := &catalogv1.WorkingDirectory{Path: croot + "/workspace", UserDataRoot: croot}
	before := f.d.ws.snapshotThread("t1")
	if before == nil {
		t.Fatal("no snapshot")
	}
	time.Sleep(10 * time.Millisecond)
	f.write(t, "workspace/new.csv", "n")    // created by the call
	f.write(t, "workspace/dup.md", "2")     // a second dup.md, created by the call
	f.write(t, "workspace/sub/dup.md", "3") // and the first one modified: two candidates

	tr := func(s string, before snapshot) string {
		out := f.d.ws.translatePaths("t1", wd, before, []*typev1.ContentBlock{{Type: typev1.ContentBlockType_CONTENT_BLOCK_TYPE_TEXT, Text: s}})
		return out[0].GetText()
	}
	for in, want := range map[string]string{
		"wrote " + croot + "/workspace/a.txt.":             "wrote /mnt/user-data/workspace/a.txt.",
		"see (file://" + croot + "/outputs/chart.png)":     "see (/mnt/user-data/outputs/chart.png)",
		"relative: sub/dup.md, ./a.txt":                    "relative: /mnt/user-data/workspace/sub/dup.md, /mnt/user-data/workspace/a.txt",
		"bare new.csv created":                             "bare /mnt/user-data/workspace/new.csv created",
		"ambiguous dup.md":                                 "ambiguous dup.md",
		"unchanged bare a.txt":                             "unchanged bare a.txt",
		"missing " + croot + "/workspace/gone.txt":         "missing " + croot + "/workspace/gone.txt",
		"escapes " + croot + "/workspace/../../etc/x":      "escapes " + croot + "/workspace/../../etc/x",
		"link " + croot + "/workspace/link":                "link " + croot + "/workspace/link",
		"other /etc/passwd and https://x.example/a.txt":    "other /etc/passwd and https://x.example/a.txt",
		"remote file://host" + croot + "/workspace/a.txt":  "remote file://host" + croot + "/workspace/a.txt",
		"virtual /mnt/user-data/workspace/a.txt":           "virtual /mnt/user-data/workspace/a.txt",
		"  keeps\nlayout\t" + croot + "/workspace/a.txt\n": "  keeps\nlayout\t/mnt/user-data/workspace/a.txt\n",
	} {
		if got := tr(in, before); got != want {
			t.Errorf("%q\n got %q\nwant %q", in, got, want)
		}
	}
	// The lookup budget: past maxLookups references nothing more is checked.
	var sb strings.Builder
	for i := 0; i < maxLookups+10; i++ {
		sb.WriteString("sub/none" + strconv.Itoa(i) + " ")
	}
	sb.WriteString(croot + "/workspace/a.txt")
	if got := tr(sb.String(), before); !strings.HasSuffix(got, croot+"/workspace/a.txt") {
		t.Errorf("a reference past the lookup budget was rewritten")
	}
	// Without a snapshot (bounds hit, first call) bare names stay.
	if got := tr("bare new.csv", nil); got != "bare new.csv" {
		t.Errorf("bare name without a snapshot: %q", got)
	}
	// A resource link's file:// URI is rewritten too.
	out := f.d.ws.translatePaths("t1", wd, nil, []*typev1.ContentBlock{{Type: typev1.ContentBlockType_CONTENT_BLOCK_TYPE_RESOURCE_LINK, Uri: "file://" + croot + "/workspace/a.txt", Name: "a"}})
	if out[0].GetUri() != "file:///mnt/user-data/workspace/a.txt" {
		t.Errorf("resource link uri = %q", out[0].GetUri())
	}
}

func TestSnapshotBounds(t *testing.T) {
	f := newSearchFixture(t)
	deep := "workspace"
	for i := 0; i < snapshotMaxDepth+1; i++ {
		deep += "/d"
	}
	f.write(t, deep+"/x.txt", "x")
	if s := f.d.ws.snapshotThread("t1"); s != nil {
		t.Fatalf("a walk past depth %d was kept (%d entries)", snapshotMaxDepth, len(s))
	}
}
