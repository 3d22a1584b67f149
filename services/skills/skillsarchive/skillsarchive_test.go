package skillsarchive_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/toolplane/toolplane/services/skills/skillsarchive"
	sat "github.com/toolplane/toolplane/services/skills/skillsarchive/skillsarchivetest"
)

func TestReadGoodZipAndTar(t *testing.T) {
	for name, data := range map[string][]byte{
		"zip": sat.Good(),
		"tar": sat.TarGz(
			sat.Entry{Name: "./demo-skill/", Kind: "dir"},
			sat.Entry{Name: "./demo-skill/SKILL.md", Data: sat.SkillMD("demo-skill", "")},
			sat.Entry{Name: "./demo-skill/scripts/run.py", Data: []byte("print(1)\n"), Mode: 0o755},
			sat.Entry{Name: "./demo-skill/references/notes.md", Data: []byte("# n\n")},
		),
	} {
		t.Run(name, func(t *testing.T) {
			pkg, err := skillsarchive.Read(data, skillsarchive.Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if pkg.RootName != "demo-skill" {
				t.Fatalf("root %q", pkg.RootName)
			}
			var paths []string
			for _, f := range pkg.Files {
				paths = append(paths, f.Path)
			}
			if got := strings.Join(paths, ","); got != "SKILL.md,references/notes.md,scripts/run.py" {
				t.Fatalf("paths %s", got)
			}
			if f := pkg.File("scripts/run.py"); f == nil || !f.Executable {
				t.Fatalf("exec bit lost: %+v", f)
			}
			if pkg.File("missing") != nil {
				t.Fatal("File found a missing path")
			}
		})
	}
}

func TestFlatArchiveAndDotfiles(t *testing.T) {
	pkg, err := skillsarchive.Read(sat.Zip(
		sat.Entry{Name: "SKILL.md", Data: sat.SkillMD("x", "")},
		sat.Entry{Name: "a.txt", Data: []byte("a")},
	), skillsarchive.Limits{})
	if err != nil || pkg.RootName != "" || len(pkg.Files) != 2 {
		t.Fatalf("flat: %v %+v", err, pkg)
	}
	// Top-level dotfile beside one folder: the folder is still the root; the
	// dotfile is dropped; __MACOSX is skipped.
	pkg, err = skillsarchive.Read(sat.Zip(
		sat.Entry{Name: ".DS_Store", Data: []byte("junk")},
		sat.Entry{Name: "__MACOSX/x/._SKILL.md", Data: []byte("junk")},
		sat.Entry{Name: "x/SKILL.md", Data: sat.SkillMD("x", "")},
	), skillsarchive.Limits{})
	if err != nil || pkg.RootName != "x" || len(pkg.Files) != 1 {
		t.Fatalf("dotfile: %v %+v", err, pkg)
	}
}

func TestHostileCorpusRefused(t *testing.T) {
	for _, c := range sat.Hostile() {
		t.Run(c.Name, func(t *testing.T) {
			pkg, err := skillsarchive.Read(c.Data, skillsarchive.Limits{})
			if strings.HasPrefix(c.Reason, "scan:") {
				if err != nil {
					t.Fatalf("reader refused scanner case: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted; files %d", len(pkg.Files))
			}
			if got := skillsarchive.ReasonOf(err); string(got) != c.Reason {
				t.Fatalf("reason %q, want %q (%v)", got, c.Reason, err)
			}
		})
	}
}

func TestLimits(t *testing.T) {
	small := skillsarchive.Limits{MaxFileBytes: 100, MaxTotalBytes: 150, MaxArchiveBytes: 100000}
	md := sat.Entry{Name: "SKILL.md", Data: sat.SkillMD("x", "")}
	_, err := skillsarchive.Read(sat.TarGz(md, sat.Entry{Name: "big", Data: bytes.Repeat([]byte("a"), 101)}), small)
	if skillsarchive.ReasonOf(err) != skillsarchive.ReasonFileTooLarge {
		t.Fatalf("file too large: %v", err)
	}
	small.MaxFileBytes = 1000
	_, err = skillsarchive.Read(sat.Zip(md, sat.Entry{Name: "big", Data: bytes.Repeat([]byte("b"), 140)}), small)
	if skillsarchive.ReasonOf(err) != skillsarchive.ReasonTooLarge {
		t.Fatalf("total too large: %v", err)
	}
	_, err = skillsarchive.Read(sat.Good(), skillsarchive.Limits{MaxArchiveBytes: 10})
	if skillsarchive.ReasonOf(err) != skillsarchive.ReasonArchiveTooLarge {
		t.Fatalf("archive too large: %v", err)
	}
	// Repetitive but small text is not a bomb (ratio floor).
	_, err = skillsarchive.Read(sat.Zip(md, sat.Entry{Name: "log.txt", Data: bytes.Repeat([]byte("a"), 500<<10)}), skillsarchive.Limits{})
	if err != nil {
		t.Fatalf("small repetitive file refused: %v", err)
	}
}

func TestFromFiles(t *testing.T) {
	pkg, err := skillsarchive.FromFiles(map[string][]byte{
		"SKILL.md": sat.SkillMD("x", ""), "scripts/a.sh": []byte("echo\n"),
	}, map[string]bool{"scripts/a.sh": true}, skillsarchive.Limits{})
	if err != nil || len(pkg.Files) != 2 || !pkg.File("scripts/a.sh").Executable {
		t.Fatalf("%v %+v", err, pkg)
	}
	for name, want := range map[string]skillsarchive.Reason{
		"../x": skillsarchive.ReasonTraversal, "/x": skillsarchive.ReasonAbsolutePath, "a:b": skillsarchive.ReasonColon,
	} {
		_, err := skillsarchive.FromFiles(map[string][]byte{"SKILL.md": sat.SkillMD("x", ""), name: []byte("1")}, nil, skillsarchive.Limits{})
		if skillsarchive.ReasonOf(err) != want {
			t.Errorf("%s: %v", name, err)
		}
	}
	_, err = skillsarchive.FromFiles(map[string][]byte{"SKILL.md": sat.SkillMD("x", ""), "bin": sat.ELF}, nil, skillsarchive.Limits{})
	if skillsarchive.ReasonOf(err) != skillsarchive.ReasonExecutable {
		t.Fatalf("elf inline: %v", err)
	}
}

func TestExecutableKindTextMZ(t *testing.T) {
	if k := skillsarchive.ExecutableKind([]byte("MZ is a two-letter word in this text.")); k != "" {
		t.Fatalf("text starting with MZ flagged as %s", k)
	}
}

func FuzzRead(f *testing.F) {
	f.Add(sat.Good())
	f.Add(sat.TarGz(sat.Entry{Name: "x/SKILL.md", Data: sat.SkillMD("x", "")}))
	for _, c := range sat.Hostile() {
		if len(c.Data) < 4096 {
			f.Add(c.Data)
		}
	}
	lim := skillsarchive.Limits{MaxEntries: 64, MaxFileBytes: 1 << 16, MaxTotalBytes: 1 << 18}
	f.Fuzz(func(t *testing.T, data []byte) {
		pkg, err := skillsarchive.Read(data, lim)
		if err != nil {
			if skillsarchive.ReasonOf(err) == "" {
				t.Fatalf("error without reason: %v", err)
			}
			return
		}
		if pkg.File("SKILL.md") == nil {
			t.Fatal("accepted package without SKILL.md")
		}
		for _, f := range pkg.Files {
			if strings.HasPrefix(f.Path, "/") || strings.Contains(f.Path, "..") && strings.Contains("/"+f.Path+"/", "/../") || strings.Contains(f.Path, ":") {
				t.Fatalf("unsafe path accepted: %q", f.Path)
			}
			if skillsarchive.ExecutableKind(f.Data) != "" {
				t.Fatalf("executable accepted: %q", f.Path)
			}
		}
		if pkg.TotalBytes() > lim.MaxTotalBytes {
			t.Fatal("total limit exceeded")
		}
	})
}

func TestDigestFormatIndependent(t *testing.T) {
	z, err := skillsarchive.Read(sat.Zip(sat.Entry{Name: "x/SKILL.md", Data: sat.SkillMD("x", "")}, sat.Entry{Name: "x/a.txt", Data: []byte("a")}), skillsarchive.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	g, err := skillsarchive.Read(sat.TarGz(sat.Entry{Name: "x/a.txt", Data: []byte("a")}, sat.Entry{Name: "x/SKILL.md", Data: sat.SkillMD("x", "")}), skillsarchive.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if z.Digest() != g.Digest() || len(z.Digest()) != 64 {
		t.Fatalf("%s != %s", z.Digest(), g.Digest())
	}
	g.Files[1].Data = []byte("b")
	if z.Digest() == g.Digest() {
		t.Fatal("digest ignores content")
	}
}

func TestZipEntryCountPrecheck(t *testing.T) {
	var es []sat.Entry
	for i := 0; i < 70; i++ {
		es = append(es, sat.Entry{Name: fmt.Sprintf("x/f%03d.txt", i), Data: []byte("x")})
	}
	data := sat.Zip(es...)
	_, err := skillsarchive.Read(data, skillsarchive.Limits{MaxEntries: 64})
	var r *skillsarchive.RefusalError
	if !errors.As(err, &r) || r.Reason != skillsarchive.ReasonTooManyEntries || !strings.Contains(r.Detail, "declares 70 entries") {
		t.Fatalf("%v", err)
	}
}

func TestTarFolderWithData(t *testing.T) {
	// A folder header whose size field (octal, offset 124) claims 32 KiB of
	// data, with a recomputed checksum (archive/tar refuses to write one).
	hdr := &tar.Header{Name: "y/", Typeflag: tar.TypeDir, Mode: 0o755}
	var tb bytes.Buffer
	tw2 := tar.NewWriter(&tb)
	tw2.WriteHeader(hdr)
	tw2.Flush()
	block := tb.Bytes()[:512]
	copy(block[124:136], []byte("00000100000\x00"))
	sum := 0
	copy(block[148:156], []byte("        "))
	for _, c := range block {
		sum += int(c)
	}
	copy(block[148:156], []byte(fmt.Sprintf("%06o\x00 ", sum)))
	var out bytes.Buffer
	gz2 := gzip.NewWriter(&out)
	gz2.Write(block)
	gz2.Write(make([]byte, 0o100000+1024))
	gz2.Close()
	_, err := skillsarchive.Read(out.Bytes(), skillsarchive.Limits{})
	if skillsarchive.ReasonOf(err) != skillsarchive.ReasonCorrupt || !strings.Contains(err.Error(), "folder entry carries data") {
		t.Fatalf("%v", err)
	}
}

// ReadEntries applies every entry check of Read but no package layout
// rule: a data archive without SKILL.md reads, the hostile corpus's entry
// refusals still refuse.
func TestReadEntries(t *testing.T) {
	pkg, err := skillsarchive.ReadEntries(sat.Zip(sat.Entry{Name: "a/x.csv", Data: []byte("1")}, sat.Entry{Name: "b/y.csv", Data: []byte("2")}), skillsarchive.Limits{})
	if err != nil || len(pkg.Files) != 2 || pkg.Files[0].Path != "a/x.csv" || pkg.RootName != "" {
		t.Fatalf("data archive: %+v %v", pkg, err)
	}
	layout := map[string]bool{"missing_skill_md": true, "multiple_top_level": true, "nested_skill_md": true, "empty_package": true}
	for _, c := range sat.Hostile() {
		if strings.HasPrefix(c.Reason, "scan:") || layout[c.Reason] {
			continue
		}
		if _, err := skillsarchive.ReadEntries(c.Data, skillsarchive.Limits{}); string(skillsarchive.ReasonOf(err)) != c.Reason {
			t.Errorf("%s: %v, want %s", c.Name, err, c.Reason)
		}
	}
}
