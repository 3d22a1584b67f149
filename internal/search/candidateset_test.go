package search

import (
	"context"
	"reflect"
	"testing"
)

// TestCandidateSet: a search with a CandidateSet made by the snapshot
// answers exactly as one with the names, for every query form and mode; a
// +required query does not narrow the shared set for the next search; a
// set made by another snapshot is ignored (the names are used).
func TestCandidateSet(t *testing.T) {
	ctx := context.Background()
	ix := newTestIndex(t, sampleDocs)
	names := []string{"readFile", "list_directory", "slack_send_message", "slack_list_channels", "ghost"}
	s := ix.Snapshot()
	cs := s.CandidateSet(names)
	if !cs.Of(s) || cs.Bytes() != len(sampleDocs) {
		t.Fatalf("set of %d bytes", cs.Bytes())
	}
	queries := []string{"+slack send", "list files", "select:readFile,get_forecast,slack_list_channels", "+slack", "send message", "weather", "+list channels"}
	for round := range 2 {
		for _, q := range queries {
			for _, m := range []Mode{ModeAuto, ModeBM25, ModeRegex, ModeSemantic} {
				want, err := s.Search(ctx, Request{Query: q, Mode: m, Limit: 10, Candidates: names})
				if err != nil {
					t.Fatal(err)
				}
				got, err := s.Search(ctx, Request{Query: q, Mode: m, Limit: 10, Candidates: []string{"get_forecast"}, CandidateSet: cs})
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("round %d %q mode %d: with the set %+v, with names %+v", round, q, m, got.Results, want.Results)
				}
			}
		}
	}
	// A set of an older snapshot is ignored: the request's names apply.
	if err := ix.Upsert(ctx, Document{Name: "slack_archive", Server: "slack", Description: "Archive a Slack channel"}); err != nil {
		t.Fatal(err)
	}
	s2 := ix.Snapshot()
	if cs.Of(s2) {
		t.Fatal("a set is bound to its snapshot")
	}
	got, err := s2.Search(ctx, Request{Query: "select:slack_archive,readFile", Candidates: []string{"slack_archive"}, CandidateSet: cs})
	if err != nil || len(got.Results) != 1 || got.Results[0].Name != "slack_archive" {
		t.Fatalf("stale set: %+v %v", got, err)
	}
}
