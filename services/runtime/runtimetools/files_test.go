package runtimetools

import "testing"

func TestCleanVirtual(t *testing.T) {
	ok := map[string]string{
		"/mnt/user-data/workspace/a.txt":       "workspace/a.txt",
		"/mnt/user-data/outputs/x/../y.md":     "outputs/y.md",
		"/mnt/user-data/workspace/./b/../c.go": "workspace/c.go",
	}
	for in, want := range ok {
		if _, rel, err := CleanVirtual(in, true); err != nil || rel != want {
			t.Errorf("CleanVirtual(%q) = %q, %v; want %q", in, rel, err, want)
		}
	}
	for _, bad := range []string{"", "relative.txt", "/etc/passwd", "/mnt/user-data/workspace/../../x", "/mnt/user-data/other/x", "/mnt/user-dataX/workspace/a"} {
		if _, _, err := CleanVirtual(bad, false); err == nil {
			t.Errorf("CleanVirtual(%q) accepted", bad)
		}
	}
	if _, _, err := CleanVirtual("/mnt/user-data/uploads/a", true); err == nil {
		t.Error("uploads writable")
	}
	if _, rel, err := CleanVirtual("/mnt/user-data/uploads/a", false); err != nil || rel != "uploads/a" {
		t.Errorf("uploads not readable: %v", err)
	}
}

func TestSliceLines(t *testing.T) {
	text := "a\nb\nc\n"
	for _, c := range []struct {
		s, e       int
		hs, he     bool
		want       string
		shouldFail bool
	}{
		{0, 0, false, false, text, false},
		{2, 0, true, false, "b\nc\n", false},
		{1, 2, true, true, "a\nb\n", false},
		{3, 9, true, true, "c\n", false},
		{5, 6, true, true, "", true},
		{2, 1, true, true, "", true},
	} {
		got, err := sliceLines(text, readRange{Start: c.s, End: c.e, HasStart: c.hs, HasEnd: c.he})
		if (err != nil) != c.shouldFail || got != c.want {
			t.Errorf("sliceLines(%d,%d) = %q, %v", c.s, c.e, got, err)
		}
	}
}
