package skills

import (
	"fmt"
	"testing"

	skillsv1 "github.com/toolplane/toolplane/gen/go/toolplane/skills/v1"
)

// benchServer has the 4 public skills plus 50 custom skills of one user.
func benchServer(b *testing.B) *Server {
	b.Helper()
	s := newServer(b, b.TempDir())
	alice := ctxFor("alice", false)
	for i := 0; i < 50; i++ {
		name := fmt.Sprintf("skill-%02d", i)
		_, err := s.InstallSkill(alice, &skillsv1.InstallSkillRequest{Source: &skillsv1.InstallSkillRequest_Files{Files: &skillsv1.InlineFiles{
			Files: []*skillsv1.SkillFile{{Path: "SKILL.md", Content: skillMD(name, fmt.Sprintf("Skill number %d for topic %d about data processing and reports.", i, i%7),
				"allowed-tools: [read_file, tool_"+fmt.Sprint(i)+"]\n", "# Body\nSome instructions.\n")}}}}})
		if err != nil {
			b.Fatal(err)
		}
	}
	return s
}

func BenchmarkInstallInline(b *testing.B) {
	s := newServer(b, b.TempDir())
	alice := ctxFor("alice", false)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		name := fmt.Sprintf("b-%d", i)
		_, err := s.InstallSkill(alice, &skillsv1.InstallSkillRequest{Source: &skillsv1.InstallSkillRequest_Files{Files: &skillsv1.InlineFiles{
			Files: []*skillsv1.SkillFile{{Path: "SKILL.md", Content: skillMD(name, "Benchmark skill.", "", "body")},
				{Path: "scripts/run.py", Content: []byte("import json\nprint(json.dumps({'ok': True}))\n")}}}}})
		if err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkListSkills(b *testing.B) {
	s := benchServer(b)
	alice := ctxFor("alice", false)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := s.ListSkills(alice, &skillsv1.ListSkillsRequest{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDescribeSkills(b *testing.B) {
	s := benchServer(b)
	alice := ctxFor("alice", false)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := s.DescribeSkills(alice, &skillsv1.DescribeSkillsRequest{Query: "review an MCP server configuration"}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkResolveSkillPolicy(b *testing.B) {
	s := benchServer(b)
	rt := serviceFor("alice")
	req := &skillsv1.ResolveSkillPolicyRequest{ActiveSkills: []*skillsv1.ActiveSkill{{Name: "skill-01"}, {Name: "mcp-config-review"}},
		AlwaysAvailable: []string{"tool_search", "describe_skill", "read_file", "review_skill_package"}}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r, err := s.ResolveSkillPolicy(rt, req)
		if err != nil || r.GetPolicy().GetUnrestricted() {
			b.Fatal(err)
		}
	}
}

// BenchmarkInstallLarge installs a 16 MiB zip of ordinary text (64 files).
func BenchmarkInstallLarge(b *testing.B) {
	s := newServer(b, b.TempDir())
	alice := ctxFor("alice", false)
	line := []byte("Step 3: open the report, check the totals against the ledger and note any difference.\n")
	var files []*skillsv1.SkillFile
	for i := 0; i < 64; i++ {
		var data []byte
		for len(data) < 256<<10 {
			data = append(data, fmt.Sprintf("%d ", len(data))...)
			data = append(data, line...)
		}
		files = append(files, &skillsv1.SkillFile{Path: fmt.Sprintf("references/part-%02d.md", i), Content: data})
	}
	b.SetBytes(64 * 256 << 10)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		name := fmt.Sprintf("large-%d", i)
		fs := append([]*skillsv1.SkillFile{{Path: "SKILL.md", Content: skillMD(name, "Large skill.", "", "")}}, files...)
		archive := zipOf(name, fs)
		b.StartTimer()
		if _, err := s.InstallSkill(alice, &skillsv1.InstallSkillRequest{Source: &skillsv1.InstallSkillRequest_Archive{Archive: archive}}); err != nil {
			b.Fatal(err)
		}
	}
}
