package skillsmem

import (
	"testing"

	"github.com/toolplane/toolplane/services/skills/skillsstore"
	"github.com/toolplane/toolplane/services/skills/skillstest"
)

func TestStoreSuite(t *testing.T) {
	skillstest.RunStoreSuite(t, func(*testing.T) skillsstore.Store { return New() })
}
