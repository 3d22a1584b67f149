package auth

import (
	"context"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
)

func reasonOf(err error) string {
	for _, d := range status.Convert(err).Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok && ei.GetDomain() == ErrorDomain {
			return ei.GetReason()
		}
	}
	return ""
}

func TestAuthenticateErrorsCarryReasons(t *testing.T) {
	a, err := NewAuthenticator(Options{Enabled: true, Tokens: []TokenSpec{
		{Name: "u", SHA256: HashToken("user-token"), Kind: KindUser, Principal: &typev1.Principal{Subject: "u", Tenant: "default"}},
		{Name: "s", SHA256: HashToken("svc-token"), Kind: KindService, Principal: &typev1.Principal{Subject: "svc", Tenant: "default"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := func(kv ...string) context.Context {
		return metadata.NewIncomingContext(context.Background(), metadata.Pairs(kv...))
	}
	cases := []struct {
		name   string
		ctx    context.Context
		code   codes.Code
		reason string
	}{
		{"no credential", ctx(), codes.Unauthenticated, ReasonCredentialMissing},
		{"not bearer", ctx("authorization", "Basic abc"), codes.Unauthenticated, ReasonCredentialMissing},
		{"unknown token", ctx("authorization", "Bearer nope"), codes.Unauthenticated, ReasonCredentialInvalid},
		{"acting-for from a user", ctx("authorization", "Bearer user-token", ActingForHeader, "default/bob"), codes.PermissionDenied, ReasonActingForForbidden},
		{"malformed acting-for", ctx("authorization", "Bearer svc-token", ActingForHeader, "bob"), codes.PermissionDenied, ReasonActingForMalformed},
	}
	for _, c := range cases {
		_, err := a.Authenticate(c.ctx)
		if status.Code(err) != c.code || reasonOf(err) != c.reason {
			t.Errorf("%s: %v (reason %q); want %s / %s", c.name, err, reasonOf(err), c.code, c.reason)
		}
	}
	id, err := a.Authenticate(ctx("authorization", "Bearer svc-token", ActingForHeader, "acme/bob;roles=user,viewer;attr.dept=ops"))
	if err != nil {
		t.Fatal(err)
	}
	p := EffectivePrincipal(WithIdentity(context.Background(), id))
	if p.GetSubject() != "bob" || p.GetTenant() != "acme" || len(p.GetRoles()) != 2 || p.GetAttributes()["dept"] != "ops" {
		t.Fatalf("acting-for principal = %v", p)
	}
	if got := FormatActingFor(p); got != "acme/bob;roles=user,viewer;attr.dept=ops" {
		t.Fatalf("FormatActingFor = %q", got)
	}
}

// TestVerifiedCredentialIsReused: an identity recorded by the transport-level
// check is used as is (the credential is not verified again), and the
// acting-for rule still applies to it.
func TestVerifiedCredentialIsReused(t *testing.T) {
	a, err := NewAuthenticator(Options{Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	user := Identity{Principal: &typev1.Principal{Subject: "u", Tenant: "default"}, Kind: KindUser}
	// No authorization metadata at all: only the recorded identity can admit it.
	ctx := WithVerifiedCredential(metadata.NewIncomingContext(context.Background(), metadata.MD{}), user)
	id, err := a.Authenticate(ctx)
	if err != nil || id.Principal.GetSubject() != "u" {
		t.Fatalf("Authenticate with a verified credential = %v, %v", id, err)
	}
	ctx = WithVerifiedCredential(metadata.NewIncomingContext(context.Background(), metadata.Pairs(ActingForHeader, "default/bob")), user)
	if _, err := a.Authenticate(ctx); status.Code(err) != codes.PermissionDenied || reasonOf(err) != ReasonActingForForbidden {
		t.Fatalf("acting-for from a verified user credential: %v", err)
	}
	if _, err := a.Authenticate(metadata.NewIncomingContext(context.Background(), metadata.MD{})); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("without the recorded identity: %v", err)
	}
}
