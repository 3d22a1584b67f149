// Package auth turns credentials into a Principal and enforces the RPC-class
// table and the acting-for rule (docs/architecture.md §5).
//
// Credentials are static bearer tokens (only their SHA-256 hashes are kept in
// config) or JWTs (HS256/RS256/ES256 with issuer, audience and expiry checked
// by github.com/golang-jwt/jwt/v5). Each credential is of kind `user` or
// `service`. A service credential may name the end user it acts for in the
// metadata key ActingForHeader; from any other credential that key is
// PERMISSION_DENIED. CallContext is trusted only from service credentials.
//
// With authentication off (the local default, loopback only) every caller is
// DefaultPrincipal.
package auth

import (
	"context"
	"slices"

	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
	"google.golang.org/protobuf/proto"
)

// Class is the access class of an RPC, checked by the shared interceptor.
type Class int

const (
	// ClassUnknown is the zero value; an RPC missing from its service's table
	// is refused (fail closed).
	ClassUnknown Class = iota
	// ClassPublic: any authenticated caller.
	ClassPublic
	// ClassService: service credentials or principals with the admin role.
	ClassService
	// ClassAdmin: principals with the admin role only.
	ClassAdmin
	// ClassNone: no credential needed (health, reflection).
	ClassNone
	// ClassGlobalAdmin: admins of a tenant listed in auth.global_admin_tenants
	// only — changes to resources every tenant shares (MCP servers, agents).
	ClassGlobalAdmin
)

// String returns the lower-case class name used in config and logs.
func (c Class) String() string {
	switch c {
	case ClassPublic:
		return "public"
	case ClassService:
		return "service"
	case ClassAdmin:
		return "admin"
	case ClassNone:
		return "none"
	case ClassGlobalAdmin:
		return "global_admin"
	}
	return "unknown"
}

// Kind is the kind of a credential.
type Kind string

const (
	// KindUser is an end user's credential.
	KindUser Kind = "user"
	// KindService is a service's credential (may act for users, its CallContext is trusted).
	KindService Kind = "service"
)

// AdminRole is the role that grants the admin class.
const AdminRole = "admin"

// PrincipalHeader is the gRPC metadata key (and HTTP header, through the
// gateway, base64 as for every "-bin" key) in which a service credential
// names the end user it acts for: the serialized toolplane.type.v1.Principal
// message, so that no value of a subject, tenant, role or attribute can
// change how it is read (docs/architecture.md §5).
const PrincipalHeader = "toolplane-principal-bin"

// ActingForHeader is the v0.1.0 form of PrincipalHeader, accepted through
// v0.1.x: "tenant/subject" optionally followed by ";roles=r1,r2" and
// ";attr.<key>=<value>" parts, e.g. "default/alice;roles=user". A value
// any of whose parts contains one of ; , = / is refused (ParseActingFor).
const ActingForHeader = "toolplane-acting-for"

// DefaultPrincipal is the principal of every caller when authentication is off.
func DefaultPrincipal() *typev1.Principal {
	return &typev1.Principal{Subject: "local", Tenant: "default", Roles: []string{AdminRole}}
}

// Identity is an authenticated caller.
type Identity struct {
	// Principal derived from the credential.
	Principal *typev1.Principal
	// Kind of credential.
	Kind Kind
	// ActingFor is the end user named by a service credential, or nil.
	ActingFor *typev1.Principal
	// GlobalAdmin is set by Authenticate for an admin of a tenant listed in
	// auth.global_admin_tenants (default [default]; the auth-off local caller
	// is one). An admin of any other tenant is a tenant admin: its
	// administration is scoped to its tenant (docs/architecture.md §5).
	GlobalAdmin bool
}

// TenantAdmin reports whether the caller is an admin scoped to its own
// tenant (an admin that is not a global admin, with a user credential), and
// that tenant.
func (id Identity) TenantAdmin() (string, bool) {
	if id.Kind == KindService || !id.Admin() || id.GlobalAdmin {
		return "", false
	}
	return tenantOf(id.Principal), true
}

// Admin reports whether the caller's own principal has the admin role.
func (id Identity) Admin() bool {
	return id.Principal != nil && slices.Contains(id.Principal.GetRoles(), AdminRole)
}

// Service reports whether the caller may act as a service: a service
// credential, or a global admin (an admin of a tenant in
// auth.global_admin_tenants). A tenant admin is not a service caller: it
// may not call service-class RPCs (the catalog's tools, direct tool calls)
// nor supply call contexts or resource attributes (docs/architecture.md §5).
func (id Identity) Service() bool {
	return id.Kind == KindService || (id.Admin() && id.GlobalAdmin)
}

type identityKey struct{}

// WithIdentity returns ctx carrying id. The interceptor calls it; tests use
// it to build handler contexts.
func WithIdentity(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// Caller returns the authenticated caller of ctx.
func Caller(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(Identity)
	return id, ok && id.Principal != nil
}

// EffectivePrincipal returns the principal the request is about: the
// acting-for end user when a service credential named one, else the caller's
// own principal. It returns nil only for a context that did not pass the
// authentication interceptor. The result is a copy; callers may modify it.
func EffectivePrincipal(ctx context.Context) *typev1.Principal {
	id, ok := Caller(ctx)
	if !ok {
		return nil
	}
	if id.ActingFor != nil {
		return proto.Clone(id.ActingFor).(*typev1.Principal)
	}
	return proto.Clone(id.Principal).(*typev1.Principal)
}

// IsService reports whether the caller is a service credential or an admin.
func IsService(ctx context.Context) bool {
	id, ok := Caller(ctx)
	return ok && id.Service()
}

// TrustedCallContext returns cc when the caller may supply a CallContext (a
// service credential or an admin), else nil: a CallContext from a user
// credential is ignored (docs/architecture.md §5).
func TrustedCallContext(ctx context.Context, cc *typev1.CallContext) *typev1.CallContext {
	if cc == nil || !IsService(ctx) {
		return nil
	}
	return cc
}

// SamePrincipal reports whether a and b name the same subject in the same
// tenant (an empty tenant is "default").
func SamePrincipal(a, b *typev1.Principal) bool {
	if a == nil || b == nil {
		return false
	}
	return a.GetSubject() == b.GetSubject() && tenantOf(a) == tenantOf(b)
}

// TenantOf returns the principal's tenant, "default" when it is empty —
// the one rule every service applies.
func TenantOf(p *typev1.Principal) string {
	if p.GetTenant() == "" {
		return "default"
	}
	return p.GetTenant()
}

func tenantOf(p *typev1.Principal) string { return TenantOf(p) }
