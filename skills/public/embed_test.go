package public_test

import (
	"io/fs"
	"path"
	"testing"

	"github.com/toolplane/toolplane/services/skills/skillsarchive"
	"github.com/toolplane/toolplane/services/skills/skillsmd"
	"github.com/toolplane/toolplane/services/skills/skillsscan"
	"github.com/toolplane/toolplane/skills/public"
)

// TestShippedSkills validates every public skill strictly and scans it: no
// finding above LOW is acceptable in a skill we ship.
func TestShippedSkills(t *testing.T) {
	ents, err := fs.ReadDir(public.FS, ".")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		n++
		t.Run(e.Name(), func(t *testing.T) {
			files := map[string][]byte{}
			err := fs.WalkDir(public.FS, e.Name(), func(p string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() {
					return err
				}
				data, err := fs.ReadFile(public.FS, p)
				files[path.Join(p[len(e.Name())+1:])] = data
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			pkg, err := skillsarchive.FromFiles(files, nil, skillsarchive.Limits{})
			if err != nil {
				t.Fatal(err)
			}
			doc, err := skillsmd.ParseStrict(pkg.File("SKILL.md").Data, e.Name())
			if err != nil {
				t.Fatal(err)
			}
			if len(doc.Frontmatter.Description) < 80 {
				t.Errorf("description too short to be discoverable: %q", doc.Frontmatter.Description)
			}
			rep := skillsscan.Default().Scan(pkg)
			for _, f := range rep.Findings {
				if f.Severity != skillsscan.Low {
					t.Errorf("finding in shipped skill: %+v", f)
				}
			}
		})
	}
	if n < 3 || n > 5 {
		t.Fatalf("%d public skills; ship 3 to 5", n)
	}
}
