package runtime

import (
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

func TestLoopConfigDefaultsAndTranslation(t *testing.T) {
	var c LoopConfig
	src := "models:\n  - name: gpt\n    base_url: http://127.0.0.1:9/v1\n    api_key_env: MY_KEY\nsubagents:\n  types:\n    - name: researcher\n      tools: []\n"
	dec := yaml.NewDecoder(strings.NewReader(src))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		t.Fatal(err)
	}
	c.SetDefaults()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	m := c.Models[0]
	if m.Model != "gpt" || !*m.Stream || *m.MaxRetries != 2 || m.Timeout != 2*time.Minute {
		t.Fatalf("model defaults %+v", m)
	}
	ec := c.engineConfig()
	if ec.Limits.MaxModelCalls != 25 || ec.Limits.Deadline != 10*time.Minute || ec.Limits.TokenBudget != 0 || ec.LoopDetection.WarnThreshold != 3 ||
		ec.LoopDetection.HardLimit != 5 || ec.LoopDetection.Window != 20 || ec.Subagents.MaxConcurrent != 3 || ec.Subagents.MaxTotal != 6 || ec.DisableInputSanitization {
		t.Fatalf("engine config %+v", ec)
	}
	if st := ec.Subagents.Types[0]; st.Name != "researcher" || st.Tools == nil || len(st.Tools) != 0 {
		t.Fatalf("subagent type %+v (an explicit empty allowlist must stay empty, not absent)", st)
	}
}

func TestLoopConfigErrorsNameTheKey(t *testing.T) {
	for _, tc := range []struct {
		mut  func(*LoopConfig)
		want string
	}{
		{func(c *LoopConfig) { c.Models = []ModelConfig{{Name: "a"}} }, "runtime.loop.models[0].base_url"},
		{func(c *LoopConfig) {
			c.Models = []ModelConfig{{Name: "a", BaseURL: "http://x"}, {Name: "a", BaseURL: "http://x"}}
		}, "runtime.loop.models[1].name"},
		{func(c *LoopConfig) { c.DefaultModel = "nope" }, "runtime.loop.default_model"},
		{func(c *LoopConfig) { c.TokenBudget = 10 }, "runtime.loop.token_budget"},
		{func(c *LoopConfig) { c.MaxModelCalls = -1 }, "runtime.loop.max_model_calls"},
		{func(c *LoopConfig) { c.LoopDetection.HardLimit = 2 }, "runtime.loop.loop_detection"},
		{func(c *LoopConfig) { c.Subagents.Types = []SubagentTypeConfig{{}} }, "runtime.loop.subagents.types[0].name"},
	} {
		var c LoopConfig
		tc.mut(&c)
		c.SetDefaults()
		if err := c.Validate(); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("want an error on %s, got %v", tc.want, err)
		}
	}
}
