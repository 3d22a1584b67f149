package skills

// Code in this file was written by hand from a skeleton: every RPC not yet
// implemented answers UNIMPLEMENTED with a message naming the missing
// capability. Replace a stub by implementing the method on *Server in its own file.

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	skillsv1 "github.com/toolplane/toolplane/gen/go/toolplane/skills/v1"
)

func unimplemented(capability string) error {
	return status.Errorf(codes.Unimplemented, "%s is not implemented yet", capability)
}

// ListSkills is not implemented yet: skill storage, validation, scanning and policy (issue #6).
func (s *Server) ListSkills(_ context.Context, _ *skillsv1.ListSkillsRequest) (*skillsv1.ListSkillsResponse, error) {
	return nil, unimplemented("SkillsService.ListSkills: skill storage, validation, scanning and policy (issue #6)")
}

// GetSkill is not implemented yet: skill storage, validation, scanning and policy (issue #6).
func (s *Server) GetSkill(_ context.Context, _ *skillsv1.GetSkillRequest) (*skillsv1.GetSkillResponse, error) {
	return nil, unimplemented("SkillsService.GetSkill: skill storage, validation, scanning and policy (issue #6)")
}

// InstallSkill is not implemented yet: skill storage, validation, scanning and policy (issue #6).
func (s *Server) InstallSkill(_ context.Context, _ *skillsv1.InstallSkillRequest) (*skillsv1.InstallSkillResponse, error) {
	return nil, unimplemented("SkillsService.InstallSkill: skill storage, validation, scanning and policy (issue #6)")
}

// UpdateSkill is not implemented yet: skill storage, validation, scanning and policy (issue #6).
func (s *Server) UpdateSkill(_ context.Context, _ *skillsv1.UpdateSkillRequest) (*skillsv1.UpdateSkillResponse, error) {
	return nil, unimplemented("SkillsService.UpdateSkill: skill storage, validation, scanning and policy (issue #6)")
}

// DeleteSkill is not implemented yet: skill storage, validation, scanning and policy (issue #6).
func (s *Server) DeleteSkill(_ context.Context, _ *skillsv1.DeleteSkillRequest) (*skillsv1.DeleteSkillResponse, error) {
	return nil, unimplemented("SkillsService.DeleteSkill: skill storage, validation, scanning and policy (issue #6)")
}

// ListSkillHistory is not implemented yet: skill storage, validation, scanning and policy (issue #6).
func (s *Server) ListSkillHistory(_ context.Context, _ *skillsv1.ListSkillHistoryRequest) (*skillsv1.ListSkillHistoryResponse, error) {
	return nil, unimplemented("SkillsService.ListSkillHistory: skill storage, validation, scanning and policy (issue #6)")
}

// RollbackSkill is not implemented yet: skill storage, validation, scanning and policy (issue #6).
func (s *Server) RollbackSkill(_ context.Context, _ *skillsv1.RollbackSkillRequest) (*skillsv1.RollbackSkillResponse, error) {
	return nil, unimplemented("SkillsService.RollbackSkill: skill storage, validation, scanning and policy (issue #6)")
}

// ScanSkill is not implemented yet: skill storage, validation, scanning and policy (issue #6).
func (s *Server) ScanSkill(_ context.Context, _ *skillsv1.ScanSkillRequest) (*skillsv1.ScanSkillResponse, error) {
	return nil, unimplemented("SkillsService.ScanSkill: skill storage, validation, scanning and policy (issue #6)")
}

// ReviewSkillPackage is not implemented yet: skill storage, validation, scanning and policy (issue #6).
func (s *Server) ReviewSkillPackage(_ context.Context, _ *skillsv1.ReviewSkillPackageRequest) (*skillsv1.ReviewSkillPackageResponse, error) {
	return nil, unimplemented("SkillsService.ReviewSkillPackage: skill storage, validation, scanning and policy (issue #6)")
}

// DescribeSkills is not implemented yet: skill storage, validation, scanning and policy (issue #6).
func (s *Server) DescribeSkills(_ context.Context, _ *skillsv1.DescribeSkillsRequest) (*skillsv1.DescribeSkillsResponse, error) {
	return nil, unimplemented("SkillsService.DescribeSkills: skill storage, validation, scanning and policy (issue #6)")
}

// ResolveSkillPolicy is not implemented yet: skill storage, validation, scanning and policy (issue #6).
func (s *Server) ResolveSkillPolicy(_ context.Context, _ *skillsv1.ResolveSkillPolicyRequest) (*skillsv1.ResolveSkillPolicyResponse, error) {
	return nil, unimplemented("SkillsService.ResolveSkillPolicy: skill storage, validation, scanning and policy (issue #6)")
}

// ReadSkillFile is not implemented yet: skill storage, validation, scanning and policy (issue #6).
func (s *Server) ReadSkillFile(_ context.Context, _ *skillsv1.ReadSkillFileRequest) (*skillsv1.ReadSkillFileResponse, error) {
	return nil, unimplemented("SkillsService.ReadSkillFile: skill storage, validation, scanning and policy (issue #6)")
}
