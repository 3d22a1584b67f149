package skills

import "github.com/toolplane/toolplane/internal/auth"

// Classes returns the access class of every RPC of the service, checked by the
// shared interceptor before validation and the handler (docs/architecture.md §5).
func (s *Server) Classes() map[string]auth.Class {
	return map[string]auth.Class{
		"/toolplane.skills.v1.SkillsService/ListSkills":         auth.ClassPublic,
		"/toolplane.skills.v1.SkillsService/GetSkill":           auth.ClassPublic,
		"/toolplane.skills.v1.SkillsService/InstallSkill":       auth.ClassPublic,
		"/toolplane.skills.v1.SkillsService/UpdateSkill":        auth.ClassPublic,
		"/toolplane.skills.v1.SkillsService/DeleteSkill":        auth.ClassPublic,
		"/toolplane.skills.v1.SkillsService/ListSkillHistory":   auth.ClassPublic,
		"/toolplane.skills.v1.SkillsService/RollbackSkill":      auth.ClassPublic,
		"/toolplane.skills.v1.SkillsService/ScanSkill":          auth.ClassPublic,
		"/toolplane.skills.v1.SkillsService/ReviewSkillPackage": auth.ClassPublic,
		"/toolplane.skills.v1.SkillsService/DescribeSkills":     auth.ClassPublic,
		"/toolplane.skills.v1.SkillsService/ResolveSkillPolicy": auth.ClassService,
		"/toolplane.skills.v1.SkillsService/ReadSkillFile":      auth.ClassPublic,
		"/toolplane.skills.v1.SkillsService/ManageSkill":        auth.ClassPublic,
	}
}
