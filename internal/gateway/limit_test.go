package gateway

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
)

// zeros yields n bytes of ' ' without allocating them.
type zeros struct{ n, read int64 }

func (z *zeros) Read(p []byte) (int, error) {
	if z.read >= z.n {
		return 0, io.EOF
	}
	k := min(int64(len(p)), z.n-z.read)
	for i := range p[:k] {
		p[i] = ' '
	}
	z.read += k
	return int(k), nil
}

func limitedMux(t testing.TB, reached *bool) *runtime.ServeMux {
	mux := NewMux(LimitBodies(BodyLimits{Default: 1 << 10, ToolCall: 4 << 10, Upload: 8 << 10}))
	if err := mux.HandlePath(http.MethodPost, "/v1/threads/{thread_id}:executeToolCall", func(w http.ResponseWriter, r *http.Request, _ map[string]string) {
		if _, err := io.ReadAll(r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		*reached = true
	}); err != nil {
		t.Fatal(err)
	}
	return mux
}

func TestLimitBodies(t *testing.T) {
	for _, c := range []struct {
		method, path, class string
	}{
		{"POST", "/v1/threads/t:executeToolCall", "tool_call"}, {"POST", "/v1/threads/t:executeToolCallStream", "tool_call"},
		{"POST", "/v1/tools/x:call", "tool_call"}, {"POST", "/v1/tools/x:callStream", "tool_call"},
		{"POST", "/v1/skills:install", "upload"}, {"PATCH", "/v1/skills/x", "upload"}, {"POST", "/v1/threads", "default"},
		{"POST", "/v1/policies", "default"},
	} {
		if got, _ := RouteClass(c.method, c.path); got != c.class {
			t.Errorf("%s %s: class %s, want %s", c.method, c.path, got, c.class)
		}
	}
	reached := false
	mux := limitedMux(t, &reached)
	// Content-Length over the bound: refused before a byte is read.
	z := &zeros{n: 1 << 30}
	req := httptest.NewRequest(http.MethodPost, "/v1/threads/t:executeToolCall", z)
	req.ContentLength = 1 << 30
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, req)
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "server.http.tool_call_max_body_bytes") || !strings.Contains(w.Body.String(), ReasonRequestTooLarge) || z.read != 0 || reached {
		t.Fatalf("Content-Length: %d %s (read %d, reached %v)", w.Code, w.Body, z.read, reached)
	}
	// Chunked: at most limit+1 bytes are read, the handler sees an error.
	z = &zeros{n: 1 << 30}
	req = httptest.NewRequest(http.MethodPost, "/v1/threads/t:executeToolCall", z)
	req.ContentLength = -1
	w = httptest.NewRecorder()
	mux.ServeHTTP(w, req)
	if w.Code != http.StatusBadRequest || z.read > 4<<10+1<<15 || reached {
		t.Fatalf("chunked: %d %s (read %d, reached %v)", w.Code, w.Body, z.read, reached)
	}
	// Within the bound: served.
	req = httptest.NewRequest(http.MethodPost, "/v1/threads/t:executeToolCall", strings.NewReader("{}"))
	w = httptest.NewRecorder()
	mux.ServeHTTP(w, req)
	if !reached {
		t.Fatalf("a small body was refused: %d %s", w.Code, w.Body)
	}
}

// BenchmarkRefuseOversizedREST: the refusal costs the same for 8 MiB and
// 1 GiB bodies (bounded by the limit, not the body).
func BenchmarkRefuseOversizedREST(b *testing.B) {
	reached := false
	mux := limitedMux(b, &reached)
	for _, size := range []int64{8 << 20, 64 << 20, 1 << 30} {
		for _, chunked := range []bool{false, true} {
			b.Run(fmt.Sprintf("size=%dMiB/chunked=%v", size>>20, chunked), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					req := httptest.NewRequest(http.MethodPost, "/v1/threads/t:executeToolCall", &zeros{n: size})
					req.ContentLength = size
					if chunked {
						req.ContentLength = -1
					}
					w := httptest.NewRecorder()
					mux.ServeHTTP(w, req)
					if w.Code != http.StatusBadRequest {
						b.Fatalf("status %d", w.Code)
					}
				}
			})
		}
	}
}

// TestUploadsInFlightCapped: with upload_max_in_flight uploads being served,
// one more is refused with 429 RESOURCE_EXHAUSTED before its body is read;
// once one ends, the next is served. Other routes are not capped.
func TestUploadsInFlightCapped(t *testing.T) {
	mux := NewMux(LimitBodies(BodyLimits{Default: 1 << 10, ToolCall: 4 << 10, Upload: 8 << 10, UploadInFlight: 2}))
	entered, release := make(chan struct{}, 4), make(chan struct{})
	if err := mux.HandlePath(http.MethodPost, "/v1/skills:install", func(w http.ResponseWriter, r *http.Request, _ map[string]string) {
		_, _ = io.ReadAll(r.Body)
		entered <- struct{}{}
		<-release
	}); err != nil {
		t.Fatal(err)
	}
	if err := mux.HandlePath(http.MethodPost, "/v1/threads", func(http.ResponseWriter, *http.Request, map[string]string) {}); err != nil {
		t.Fatal(err)
	}
	upload := func(cred string, body io.Reader) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/v1/skills:install", body)
		r.Header.Set("Authorization", "Bearer "+cred)
		return r
	}
	done := make(chan int, 2)
	for _, cred := range []string{"a", "b"} {
		go func() {
			w := httptest.NewRecorder()
			mux.ServeHTTP(w, upload(cred, strings.NewReader("{}")))
			done <- w.Code
		}()
	}
	<-entered
	<-entered
	z := &zeros{n: 1 << 20}
	req := upload("c", z)
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, req)
	if w.Code != http.StatusTooManyRequests || !strings.Contains(w.Body.String(), "server.http.upload_max_in_flight") ||
		!strings.Contains(w.Body.String(), ReasonTooManyUploads) || w.Header().Get("Retry-After") == "" || z.read != 0 {
		t.Fatalf("third upload: %d %s (read %d)", w.Code, w.Body, z.read)
	}
	// One credential holds at most half the slots (slow bodies of one
	// caller cannot shut everyone out): "a"'s second upload is refused as such.
	w = httptest.NewRecorder()
	mux.ServeHTTP(w, upload("a", strings.NewReader("{}")))
	if w.Code != http.StatusTooManyRequests || !strings.Contains(w.Body.String(), "this credential already has 1") {
		t.Fatalf("second upload of a credential: %d %s", w.Code, w.Body)
	}
	w = httptest.NewRecorder()
	mux.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/threads", strings.NewReader("{}")))
	if w.Code != http.StatusOK {
		t.Fatalf("non-upload route capped: %d %s", w.Code, w.Body)
	}
	release <- struct{}{}
	if c := <-done; c != http.StatusOK {
		t.Fatalf("upload: %d", c)
	}
	go func() {
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, upload("d", strings.NewReader("{}")))
		done <- w.Code
	}()
	<-entered // a slot was freed: served
	close(release)
	for range 2 {
		if c := <-done; c != http.StatusOK {
			t.Fatalf("upload: %d", c)
		}
	}
}
