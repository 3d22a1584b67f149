// Package identitytest is the conformance suite of
// catalogstore.IdentityStore, run against the sqlite store (catalogstore)
// and the PostgreSQL store (catalogpg): stable names with their uniqueness
// per scope, pins, the audit trail and the applied configuration, across a
// reopen of the store.
package identitytest

import (
	"testing"
	"time"

	"github.com/toolplane/toolplane/services/catalog/catalogstore"
)

type (
	// IdentityStore and the row types, as the store packages spell them.
	IdentityStore = catalogstore.IdentityStore
	PairKey       = catalogstore.PairKey
	NameRow       = catalogstore.NameRow
	PinRow        = catalogstore.PinRow
	AuditRow      = catalogstore.AuditRow
)

// RunIdentitySuite runs the suite. open returns an empty store and a func
// that opens the same data again (a restart, or another replica).
func RunIdentitySuite(t *testing.T, open func(t *testing.T) (s IdentityStore, reopen func() IdentityStore)) {
	s, reopen := open(t)
	ctx := t.Context()
	now := time.Now().UTC().Truncate(time.Microsecond)
	k1 := PairKey{Scope: "*", Server: "a_b", Tool: "c"}
	k2 := PairKey{Scope: "*", Server: "a", Tool: "b_c"}
	rows := []NameRow{{PairKey: k1, Base: "a_b_c", Name: "a_b_c", AssignedAt: now, LastSeenAt: now},
		{PairKey: k2, Base: "a_b_c", Name: "a_b_c_x", AssignedAt: now, LastSeenAt: now}}
	if err := s.ApplyNames(ctx, rows, nil); err != nil {
		t.Fatal(err)
	}
	// A second pair cannot take an assigned name (UNIQUE (scope, name)),
	// and the failed call writes nothing.
	k3 := PairKey{Scope: "*", Server: "z", Tool: "a_b_c"}
	if err := s.ApplyNames(ctx, []NameRow{{PairKey: k3, Base: "a_b_c", Name: "z_ok", AssignedAt: now, LastSeenAt: now},
		{PairKey: PairKey{Scope: "*", Server: "y", Tool: "t"}, Base: "x", Name: "a_b_c", AssignedAt: now, LastSeenAt: now}}, nil); err == nil {
		t.Fatal("a duplicate name in one scope was accepted")
	}
	if names, _ := s.LoadNames(ctx); len(names) != 2 {
		t.Fatalf("a failed ApplyNames wrote rows: %d", len(names))
	}
	// The same name in another scope is fine.
	if err := s.ApplyNames(ctx, []NameRow{{PairKey: PairKey{Scope: "tenant-a", Server: "y", Tool: "t"}, Base: "a_b_c", Name: "a_b_c", AssignedAt: now, LastSeenAt: now}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.PutPins(ctx, []PinRow{{PairKey: k1, ApprovedHash: "h1", ApprovedDefinition: []byte(`{"x":1}`), UpdatedAt: now}}); err != nil {
		t.Fatal(err)
	}
	id, err := s.Review(ctx, PinRow{PairKey: k1, ApprovedHash: "h2", ApprovedDefinition: []byte(`{"x":2}`), UpdatedAt: now},
		AuditRow{At: now, Actor: "default/root", Action: "approve", PairKey: k1, Name: "a_b_c", PreviousHash: "h1", DefinitionHash: "h2", Diff: `[]`})
	if err != nil || id <= 0 {
		t.Fatalf("review: %d, %v", id, err)
	}
	if _, err := s.Review(ctx, PinRow{PairKey: k1}, AuditRow{Action: "delete"}); err == nil {
		t.Fatal("an unknown action was accepted")
	}
	if err := s.PutAppliedConfig(ctx, "/x/ext.json", []byte(`{"mcpServers": {}}`)); err != nil {
		t.Fatal(err)
	}
	s = reopen()
	names, err := s.LoadNames(ctx)
	if err != nil || len(names) != 3 {
		t.Fatalf("names after reopen = %+v, %v", names, err)
	}
	for _, n := range names {
		if n.PairKey == k1 && (n.Name != "a_b_c" || !n.AssignedAt.Equal(now)) {
			t.Fatalf("row %+v", n)
		}
	}
	pins, err := s.LoadPins(ctx)
	if err != nil || len(pins) != 1 || pins[0].ApprovedHash != "h2" || string(pins[0].ApprovedDefinition) != `{"x":2}` {
		t.Fatalf("pins = %+v, %v", pins, err)
	}
	audit, err := s.ListAudit(ctx, 10)
	if err != nil || len(audit) != 1 || audit[0].PreviousHash != "h1" || audit[0].DefinitionHash != "h2" || audit[0].Actor != "default/root" {
		t.Fatalf("audit = %+v, %v", audit, err)
	}
	raw, ok, err := s.AppliedConfig(ctx, "/x/ext.json")
	if err != nil || !ok || string(raw) != `{"mcpServers": {}}` {
		t.Fatalf("applied = %q %v %v", raw, ok, err)
	}
	if _, ok, _ := s.AppliedConfig(ctx, "/other.json"); ok {
		t.Fatal("applied config of another path")
	}
	// Deleting an assignment deletes its pin; its name is free again.
	if err := s.ApplyNames(ctx, []NameRow{{PairKey: k3, Base: "a_b_c", Name: "a_b_c", AssignedAt: now, LastSeenAt: now}}, []PairKey{k1}); err != nil {
		t.Fatal(err)
	}
	if pins, _ := s.LoadPins(ctx); len(pins) != 0 {
		t.Fatalf("pin of a deleted assignment kept: %+v", pins)
	}
}
