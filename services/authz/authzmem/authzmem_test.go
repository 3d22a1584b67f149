package authzmem

import (
	"testing"

	"github.com/toolplane/toolplane/services/authz/authzstore"
	"github.com/toolplane/toolplane/services/authz/authztest"
)

func TestStoreSuite(t *testing.T) {
	authztest.RunStoreSuite(t, func(*testing.T) authzstore.Store { return New() })
}
