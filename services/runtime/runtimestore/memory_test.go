package runtimestore_test

import (
	"testing"

	"github.com/toolplane/toolplane/services/runtime/runtimestore"
	"github.com/toolplane/toolplane/services/runtime/runtimetest"
)

func TestMemoryConformance(t *testing.T) {
	runtimetest.RunStoreSuite(t, runtimetest.Factory{Open: func(*testing.T) runtimestore.Store { return runtimestore.NewMemory() }})
}
