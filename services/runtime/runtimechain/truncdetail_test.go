package runtimechain

import (
	"strings"
	"testing"
)

func TestTruncDetail(t *testing.T) {
	long := strings.Repeat("é", 600)
	got := TruncDetail(long)
	if n := len([]rune(got)); n != 500 || !strings.HasSuffix(got, "...") {
		t.Fatalf("truncDetail: %d runes", n)
	}
	if TruncDetail(" short ") != "short" {
		t.Error("short detail changed")
	}
}
