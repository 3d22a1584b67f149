package runtimechain

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"
)

func TestCheckArguments(t *testing.T) {
	l := ArgumentLimits{MaxBytes: 1 << 10, MaxDepth: 3, MaxElements: 5}
	cases := []struct {
		raw, key string
	}{
		{`{"a":1,"b":2,"c":3,"d":4,"e":5}`, ""}, // keys are not values
		{`{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6}`, "max_elements"},
		{`{"a":{"b":[1]}}`, ""}, // depth 3
		{`{"a":{"b":[[1]]}}`, "max_depth"},
		{`{"a":[1,2,3,4,5]}`, "max_elements"}, // the array and 5 items
		{`{"k":"` + strings.Repeat("x", 2<<10) + `"}`, "max_bytes"},
		{`{"a":`, ""},               // malformed: left to decode_arguments
		{`[[[[[[[[[[`, "max_depth"}, // refused before the parse would fail
	}
	for _, c := range cases {
		e := CheckArguments(l, c.raw, nil)
		got := ""
		if e != nil {
			got = strings.TrimPrefix(e.Key, argKey)
		}
		if got != c.key {
			t.Errorf("%.40s: %q, want %q (%v)", c.raw, got, c.key, e)
		}
	}
	pb, _ := structpb.NewStruct(map[string]any{"a": []any{1, 2, 3, 4, 5, 6}})
	if e := CheckArguments(l, "", pb); e == nil || e.Key != argKey+"max_elements" {
		t.Errorf("Struct elements: %v", e)
	}
}

// The step refuses before the rest of the chain runs.
func TestInputBudgetStep(t *testing.T) {
	ran := false
	o, err := InputBudget{Limits: ArgumentLimits{MaxDepth: 2}}.Run(context.Background(), &Call{Name: "x", RawArguments: `{"a":[[1]]}`},
		func(context.Context, *Call) (*Outcome, error) { ran = true; return &Outcome{}, nil })
	if err != nil || ran || o.Reason != "input_budget.exceeded" || !strings.Contains(o.Text, "runtime.limits.tool_arguments.max_depth") {
		t.Fatalf("outcome %+v err %v ran %v", o, err, ran)
	}
}
