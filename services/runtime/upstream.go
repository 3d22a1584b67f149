package runtime

import (
	"context"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	authzv1 "github.com/toolplane/toolplane/gen/go/toolplane/authz/v1"
	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	skillsv1 "github.com/toolplane/toolplane/gen/go/toolplane/skills/v1"
)

// upstream applies the runtime's policy to every call of a generated
// upstream client: a deadline (runtime.upstream_timeout, or the tool-call
// timeout for CallTool), up to 3 attempts with exponential backoff on
// UNAVAILABLE for idempotent reads only, and a latency histogram labelled by
// service, method and status code.
type upstream struct {
	timeout     time.Duration
	callTimeout time.Duration
	latency     *prometheus.HistogramVec
}

func (u *upstream) observe(svc, method string, start time.Time, err error) {
	if u.latency != nil {
		u.latency.WithLabelValues(svc, method, status.Code(err).String()).Observe(time.Since(start).Seconds())
	}
}

// invoke runs one unary upstream call under the policy above.
func invoke[Req, Resp any](ctx context.Context, u *upstream, svc, method string, idempotent bool, timeout time.Duration,
	fn func(context.Context, Req, ...grpc.CallOption) (Resp, error), req Req, opts ...grpc.CallOption) (Resp, error) {
	start := time.Now()
	once := func() (Resp, error) {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		return fn(cctx, req, opts...)
	}
	var (
		resp Resp
		err  error
	)
	if !idempotent {
		resp, err = once()
	} else {
		b := backoff.NewExponentialBackOff()
		b.InitialInterval = 50 * time.Millisecond
		b.MaxInterval = time.Second
		resp, err = backoff.Retry(ctx, func() (Resp, error) {
			r, err := once()
			if err != nil && status.Code(err) != codes.Unavailable {
				return r, backoff.Permanent(err)
			}
			return r, err
		}, backoff.WithBackOff(b), backoff.WithMaxTries(3))
	}
	u.observe(svc, method, start, err)
	return resp, err
}

// catalogClient decorates the generated catalog client.
type catalogClient struct {
	catalogv1.CatalogServiceClient
	u *upstream
}

// ListTools calls the upstream under the runtime's policy (idempotent read, retried on UNAVAILABLE).
func (c catalogClient) ListTools(ctx context.Context, in *catalogv1.ListToolsRequest, o ...grpc.CallOption) (*catalogv1.ListToolsResponse, error) {
	return invoke(ctx, c.u, "catalog", "ListTools", true, c.u.timeout, c.CatalogServiceClient.ListTools, in, o...)
}

// GetTool calls the upstream under the runtime's policy (idempotent read, retried on UNAVAILABLE).
func (c catalogClient) GetTool(ctx context.Context, in *catalogv1.GetToolRequest, o ...grpc.CallOption) (*catalogv1.GetToolResponse, error) {
	return invoke(ctx, c.u, "catalog", "GetTool", true, c.u.timeout, c.CatalogServiceClient.GetTool, in, o...)
}

// SearchTools calls the upstream under the runtime's policy (idempotent read, retried on UNAVAILABLE).
func (c catalogClient) SearchTools(ctx context.Context, in *catalogv1.SearchToolsRequest, o ...grpc.CallOption) (*catalogv1.SearchToolsResponse, error) {
	return invoke(ctx, c.u, "catalog", "SearchTools", true, c.u.timeout, c.CatalogServiceClient.SearchTools, in, o...)
}

// GetCatalog calls the upstream under the runtime's policy (idempotent read, retried on UNAVAILABLE).
func (c catalogClient) GetCatalog(ctx context.Context, in *catalogv1.GetCatalogRequest, o ...grpc.CallOption) (*catalogv1.GetCatalogResponse, error) {
	return invoke(ctx, c.u, "catalog", "GetCatalog", true, c.u.timeout, c.CatalogServiceClient.GetCatalog, in, o...)
}

// ListAcpAgents calls the upstream under the runtime's policy (idempotent
// read, retried on UNAVAILABLE): every assembly lists ACP agents, so a
// catalog replica dying under it must not fail the assembly while another
// replica serves (tests/e2e/multinode_test.go found it).
func (c catalogClient) ListAcpAgents(ctx context.Context, in *catalogv1.ListAcpAgentsRequest, o ...grpc.CallOption) (*catalogv1.ListAcpAgentsResponse, error) {
	return invoke(ctx, c.u, "catalog", "ListAcpAgents", true, c.u.timeout, c.CatalogServiceClient.ListAcpAgents, in, o...)
}

// CallTool calls the upstream under the runtime's policy (unary call, not retried).
func (c catalogClient) CallTool(ctx context.Context, in *catalogv1.CallToolRequest, o ...grpc.CallOption) (*catalogv1.CallToolResponse, error) {
	return invoke(ctx, c.u, "catalog", "CallTool", false, c.u.callTimeout, c.CatalogServiceClient.CallTool, in, o...)
}

// authzClient decorates the generated authz client. Authorize is retried
// on UNAVAILABLE like a read (docs/decisions/0171-authorize-retried-on-unavailable.md):
// a replica that dies under the call must not refuse it while another
// serves; the price is at most one duplicate decision record per failover.
type authzClient struct {
	authzv1.AuthzServiceClient
	u *upstream
}

// FilterResources calls the upstream under the runtime's policy (idempotent read, retried on UNAVAILABLE).
func (c authzClient) FilterResources(ctx context.Context, in *authzv1.FilterResourcesRequest, o ...grpc.CallOption) (*authzv1.FilterResourcesResponse, error) {
	return invoke(ctx, c.u, "authz", "FilterResources", true, c.u.timeout, c.AuthzServiceClient.FilterResources, in, o...)
}

// Authorize calls the upstream under the runtime's policy (retried on UNAVAILABLE, see authzClient).
func (c authzClient) Authorize(ctx context.Context, in *authzv1.AuthorizeRequest, o ...grpc.CallOption) (*authzv1.AuthorizeResponse, error) {
	return invoke(ctx, c.u, "authz", "Authorize", true, c.u.timeout, c.AuthzServiceClient.Authorize, in, o...)
}

// RecordRefusal calls the upstream under the runtime's policy (unary call, not retried).
func (c authzClient) RecordRefusal(ctx context.Context, in *authzv1.RecordRefusalRequest, o ...grpc.CallOption) (*authzv1.RecordRefusalResponse, error) {
	return invoke(ctx, c.u, "authz", "RecordRefusal", false, c.u.timeout, c.AuthzServiceClient.RecordRefusal, in, o...)
}

// skillsClient decorates the generated skills client.
type skillsClient struct {
	skillsv1.SkillsServiceClient
	u *upstream
}

// ListSkills calls the upstream under the runtime's policy (idempotent read, retried on UNAVAILABLE).
func (c skillsClient) ListSkills(ctx context.Context, in *skillsv1.ListSkillsRequest, o ...grpc.CallOption) (*skillsv1.ListSkillsResponse, error) {
	return invoke(ctx, c.u, "skills", "ListSkills", true, c.u.timeout, c.SkillsServiceClient.ListSkills, in, o...)
}

// GetSkill calls the upstream under the runtime's policy (idempotent read, retried on UNAVAILABLE).
func (c skillsClient) GetSkill(ctx context.Context, in *skillsv1.GetSkillRequest, o ...grpc.CallOption) (*skillsv1.GetSkillResponse, error) {
	return invoke(ctx, c.u, "skills", "GetSkill", true, c.u.timeout, c.SkillsServiceClient.GetSkill, in, o...)
}

// DescribeSkills calls the upstream under the runtime's policy (idempotent read, retried on UNAVAILABLE).
func (c skillsClient) DescribeSkills(ctx context.Context, in *skillsv1.DescribeSkillsRequest, o ...grpc.CallOption) (*skillsv1.DescribeSkillsResponse, error) {
	return invoke(ctx, c.u, "skills", "DescribeSkills", true, c.u.timeout, c.SkillsServiceClient.DescribeSkills, in, o...)
}

// ResolveSkillPolicy calls the upstream under the runtime's policy (idempotent read, retried on UNAVAILABLE).
func (c skillsClient) ResolveSkillPolicy(ctx context.Context, in *skillsv1.ResolveSkillPolicyRequest, o ...grpc.CallOption) (*skillsv1.ResolveSkillPolicyResponse, error) {
	return invoke(ctx, c.u, "skills", "ResolveSkillPolicy", true, c.u.timeout, c.SkillsServiceClient.ResolveSkillPolicy, in, o...)
}

// ReadSkillFile calls the upstream under the runtime's policy (idempotent read, retried on UNAVAILABLE).
func (c skillsClient) ReadSkillFile(ctx context.Context, in *skillsv1.ReadSkillFileRequest, o ...grpc.CallOption) (*skillsv1.ReadSkillFileResponse, error) {
	return invoke(ctx, c.u, "skills", "ReadSkillFile", true, c.u.timeout, c.SkillsServiceClient.ReadSkillFile, in, o...)
}

// ReviewSkillPackage calls the upstream under the runtime's policy (idempotent read, retried on UNAVAILABLE).
func (c skillsClient) ReviewSkillPackage(ctx context.Context, in *skillsv1.ReviewSkillPackageRequest, o ...grpc.CallOption) (*skillsv1.ReviewSkillPackageResponse, error) {
	return invoke(ctx, c.u, "skills", "ReviewSkillPackage", true, c.u.timeout, c.SkillsServiceClient.ReviewSkillPackage, in, o...)
}
