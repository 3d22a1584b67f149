package catalogstore_test

import (
	"path/filepath"
	"testing"

	"github.com/toolplane/toolplane/services/catalog/catalogstore"
	"github.com/toolplane/toolplane/services/catalog/catalogstore/identitytest"
	"github.com/toolplane/toolplane/services/catalog/catalogstore/oauthstoretest"
)

func TestIdentityConformance(t *testing.T) {
	identitytest.RunIdentitySuite(t, func(t *testing.T) (catalogstore.IdentityStore, func() catalogstore.IdentityStore) {
		path := filepath.Join(t.TempDir(), "catalog.db")
		open := func() catalogstore.IdentityStore {
			s, err := catalogstore.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}
		return open(), open
	})
}

func TestOAuthStoreConformance(t *testing.T) {
	oauthstoretest.Run(t, func(t *testing.T) oauthstoretest.Open {
		path := filepath.Join(t.TempDir(), "catalog.db")
		return func(keys *catalogstore.Keyring) oauthstoretest.Store {
			s, err := catalogstore.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s.OAuth(keys)
		}
	})
}
