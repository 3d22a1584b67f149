package skillsblob_test

import (
	"testing"

	"github.com/toolplane/toolplane/services/skills/skillsblob"
	"github.com/toolplane/toolplane/services/skills/skillsstore"
	"github.com/toolplane/toolplane/services/skills/skillstest"
)

var _ skillsstore.Blobs = (*skillsblob.Store)(nil)

func TestBlobSuite(t *testing.T) {
	skillstest.RunBlobSuite(t, func(t *testing.T) skillsstore.Blobs {
		s, err := skillsblob.Open(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return s
	}, 1<<20)
}
