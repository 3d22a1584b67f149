package authz

import (
	"context"
	"encoding/base64"
	"strconv"

	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	authzv1 "github.com/toolplane/toolplane/gen/go/toolplane/authz/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
	"github.com/toolplane/toolplane/internal/auth"
	"github.com/toolplane/toolplane/services/authz/authzstore"
)

func encodePageToken(seq int64) string {
	if seq == 0 {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString([]byte("d" + strconv.FormatInt(seq, 10)))
}

func decodePageToken(tok string) (int64, bool) {
	if tok == "" {
		return 0, true
	}
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil || len(b) < 2 || b[0] != 'd' {
		return 0, false
	}
	seq, err := strconv.ParseInt(string(b[1:]), 10, 64)
	return seq, err == nil && seq > 0
}

// ListDecisions reads the decision log of the caller's tenant (the tenant of
// its effective principal), newest first, with filters and pagination.
func (s *Server) ListDecisions(ctx context.Context, req *authzv1.ListDecisionsRequest) (*authzv1.ListDecisionsResponse, error) {
	f := authzstore.Filter{
		Tenant:   tenantOf(auth.EffectivePrincipal(ctx)),
		Subject:  req.GetSubject(),
		Resource: resourceNames[req.GetResourceType()],
		Kind:     authzstore.Kind(req.GetKind()),
	}
	if req.Allow != nil {
		a := req.GetAllow()
		f.Allow = &a
	}
	if req.GetSince() != nil {
		f.Since = req.GetSince().AsTime()
	}
	size := int(req.GetPageSize())
	if size == 0 {
		size = 100
	}
	before, _ := decodePageToken(req.GetPageToken())
	recs, next, err := s.store.ListDecisions(ctx, f, size, before)
	if err != nil {
		return nil, toStatus(err)
	}
	resp := &authzv1.ListDecisionsResponse{NextPageToken: encodePageToken(next)}
	for _, r := range recs {
		out := &authzv1.DecisionRecord{
			Id: r.ID, Kind: authzv1.DecisionKind(r.Kind), Time: timestamppb.New(r.Time),
			Principal:    &typev1.Principal{Subject: r.Subject, Tenant: r.Tenant, Roles: r.Roles, Attributes: r.Attributes},
			ResourceType: resourceEnum(r.Resource), Action: actionEnum(r.Action), Target: r.Target,
			CallContext: callContextToProto(r.CallContext), Allow: r.Allow, Reasons: reasonsToProto(r.Reasons),
			PolicyVersion: r.PolicyVersion, CandidateCount: int32(r.CandidateCount), AllowedCount: int32(r.AllowedCount), Denied: r.Denied,
		}
		if r.Input != nil {
			if st, err := structpb.NewStruct(r.Input); err == nil {
				out.Input = st
			}
		}
		resp.Decisions = append(resp.Decisions, out)
	}
	return resp, nil
}
