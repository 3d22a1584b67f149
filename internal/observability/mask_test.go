package observability

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestMaskerBoundaries(t *testing.T) {
	m := &Masker{}
	m.Set("a", []string{"s3cr3t-\"quoted\"-value", "ab"}) // "ab" is too short to search for
	m.Set("b", []string{"other-secret-1"})
	// Logs: the JSON and text handlers' escaped spellings are masked too.
	var buf bytes.Buffer
	w := m.Writer(&buf)
	for _, line := range []string{`msg="x" err="s3cr3t-\"quoted\"-value"` + "\n", `{"err":"s3cr3t-\"quoted\"-value other-secret-1 ab"}` + "\n", "Authorization: Bearer abc.def\n"} {
		if _, err := w.Write([]byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	out := buf.String()
	if strings.Contains(out, "s3cr3t") || strings.Contains(out, "other-secret-1") || strings.Contains(out, "abc.def") || !strings.Contains(out, " ab\"") {
		t.Fatalf("log lines: %s", out)
	}
	// gRPC errors keep their code; other errors keep errors.Is.
	st := m.MaskError(status.Error(codes.Unavailable, "dial https://x/?k=other-secret-1 failed"))
	if status.Code(st) != codes.Unavailable || strings.Contains(st.Error(), "other-secret-1") {
		t.Fatalf("status: %v", st)
	}
	base := errors.New("boom other-secret-1")
	if e := m.MaskError(base); !errors.Is(e, base) || strings.Contains(e.Error(), "other-secret-1") {
		t.Fatalf("error: %v", e)
	}
	// Removing an owner's secrets stops masking them.
	m.Set("b", nil)
	if got := m.Mask("other-secret-1"); got != "other-secret-1" {
		t.Fatalf("removed secret still masked: %s", got)
	}
}
