package archivekind

import "testing"

func TestOf(t *testing.T) {
	tarHead := make([]byte, 300)
	copy(tarHead[257:], "ustar")
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"a.png", []byte("PK\x03\x04rest"), "zip"},
		{"data.bin", []byte{0x1f, 0x8b, 8, 0}, "gzip"},
		{"x", tarHead, "tar"},
		{"x", []byte("BZh9rest"), "bzip2"},
		{"x", []byte("BZhx"), ""},
		{"x", []byte{0xfd, '7', 'z', 'X', 'Z', 0, 1}, "xz"},
		{"x", []byte{0x28, 0xb5, 0x2f, 0xfd, 0}, "zstd"},
		{"x", []byte("7z\xbc\xaf\x27\x1c"), "7z"},
		{"x", []byte("Rar!\x1a\x07\x00"), "rar"},
		{"pkg.JAR", []byte("plain"), "jar"},
		{"notes.txt", []byte("plain text"), ""},
	}
	for _, c := range cases {
		if got := Of(c.name, c.data); got != c.want {
			t.Errorf("Of(%q, %q) = %q, want %q", c.name, c.data, got, c.want)
		}
	}
}
