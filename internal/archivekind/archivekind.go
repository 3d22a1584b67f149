// Package archivekind recognises archives and compressed streams by their
// magic bytes, falling back to the file name's extension. The skills
// service (skill packages) and the runtime (thread uploads) decide with it
// what must be unpacked and scanned, or refused when it cannot be.
package archivekind

import (
	"bytes"
	"strings"
)

var archiveExts = []string{".zip", ".jar", ".war", ".whl", ".skill", ".tar", ".tgz", ".gz", ".bz2", ".xz", ".zst", ".7z", ".rar"}

// Of returns a short name when data (or, failing that, the file
// name's extension) marks an archive or compressed stream, else "".
func Of(name string, data []byte) string {
	switch {
	case bytes.HasPrefix(data, []byte("PK\x03\x04")), bytes.HasPrefix(data, []byte("PK\x05\x06")), bytes.HasPrefix(data, []byte("PK\x07\x08")):
		return "zip"
	case bytes.HasPrefix(data, []byte{0x1f, 0x8b}):
		return "gzip"
	case len(data) > 262 && string(data[257:262]) == "ustar":
		return "tar"
	case bytes.HasPrefix(data, []byte("7z\xbc\xaf\x27\x1c")):
		return "7z"
	case bytes.HasPrefix(data, []byte("Rar!\x1a\x07")):
		return "rar"
	case bytes.HasPrefix(data, []byte("BZh")) && len(data) > 3 && data[3] >= '1' && data[3] <= '9':
		return "bzip2"
	case bytes.HasPrefix(data, []byte{0xfd, '7', 'z', 'X', 'Z', 0}):
		return "xz"
	case bytes.HasPrefix(data, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		return "zstd"
	}
	lower := strings.ToLower(name)
	for _, e := range archiveExts {
		if strings.HasSuffix(lower, e) {
			return strings.TrimPrefix(e, ".")
		}
	}
	return ""
}
