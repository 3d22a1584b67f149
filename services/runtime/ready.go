package runtime

import (
	"context"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	authzv1 "github.com/toolplane/toolplane/gen/go/toolplane/authz/v1"
	catalogv1 "github.com/toolplane/toolplane/gen/go/toolplane/catalog/v1"
	skillsv1 "github.com/toolplane/toolplane/gen/go/toolplane/skills/v1"
	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
	"github.com/toolplane/toolplane/services/runtime/runtimeassembly"
)

// credentialProbeTTL is how long a successful credential probe of the
// upstreams is trusted before readiness probes again.
const credentialProbeTTL = 30 * time.Second

// credentialProbe remembers when the runtime's credential was last accepted
// by every upstream. gRPC health needs no credential, so SERVING alone does
// not prove that the runtime can call its upstreams (a wrong token_file, an
// expired certificate for mTLS, a token of kind user): readiness also makes
// one side-effect-free, service-class call per upstream.
type credentialProbe struct {
	mu sync.Mutex
	ok time.Time
}

// probe calls one read-only RPC of each upstream with the
// runtime's credential and names every upstream that refuses it.
func (p *credentialProbe) probe(ctx context.Context, cat catalogv1.CatalogServiceClient, az authzv1.AuthzServiceClient, sk skillsv1.SkillsServiceClient) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if time.Since(p.ok) < credentialProbeTTL {
		return nil
	}
	var bad []string
	check := func(name string, call func(context.Context) error) {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		err := call(cctx)
		switch status.Code(err) {
		case codes.OK:
		case codes.Unauthenticated, codes.PermissionDenied:
			bad = append(bad, fmt.Sprintf("%s refuses the runtime's credential (%s: %s)", name, status.Code(err), status.Convert(err).Message()))
		default:
			bad = append(bad, fmt.Sprintf("%s probe failed (%s)", name, runtimeassembly.ShortErr(err)))
		}
	}
	// GetCatalog over an empty candidate set: class service, no side effect.
	check("catalog", func(ctx context.Context) error {
		_, err := cat.GetCatalog(ctx, &catalogv1.GetCatalogRequest{Candidates: &typev1.StringList{}})
		return err
	})
	// The first message of WatchPolicy: no audit record, no side effect.
	check("authz", func(ctx context.Context) error {
		stream, err := az.WatchPolicy(ctx, &authzv1.WatchPolicyRequest{})
		if err != nil {
			return err
		}
		_, err = stream.Recv()
		return err
	})
	// ResolveSkillPolicy with no active skill: class service, no side effect.
	check("skills", func(ctx context.Context) error {
		_, err := sk.ResolveSkillPolicy(ctx, &skillsv1.ResolveSkillPolicyRequest{})
		return err
	})
	if len(bad) == 0 {
		p.ok = time.Now()
	}
	return bad
}
