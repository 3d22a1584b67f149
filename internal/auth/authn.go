package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	typev1 "github.com/toolplane/toolplane/gen/go/toolplane/type/v1"
)

// TokenSpec is one static bearer token, known by its SHA-256 hash only.
type TokenSpec struct {
	// Name identifies the token in logs.
	Name string
	// SHA256 is the lowercase hex SHA-256 of the token.
	SHA256 string
	// Kind of credential.
	Kind Kind
	// Principal the token stands for.
	Principal *typev1.Principal
}

// JWTSpec configures JWT verification.
type JWTSpec struct {
	// HMACSecret is the HS256 key; nil when a public key is used.
	HMACSecret []byte
	// PublicKey is an *rsa.PublicKey (RS256) or *ecdsa.PublicKey (ES256).
	PublicKey any
	// Issuer and Audience are checked when non-empty.
	Issuer, Audience string
	// Leeway tolerates clock skew.
	Leeway time.Duration
	// KindClaim, TenantClaim, RolesClaim, AttributesClaim name the claims.
	KindClaim, TenantClaim, RolesClaim, AttributesClaim string
	// DefaultKind applies when the kind claim is absent.
	DefaultKind Kind
}

// Options configure an Authenticator.
type Options struct {
	// Enabled turns authentication on; off, every caller is DefaultPrincipal (admin).
	Enabled bool
	// Tokens are the static bearer tokens.
	Tokens []TokenSpec
	// JWT, when non-nil, accepts JWTs.
	JWT *JWTSpec
	// GlobalAdminTenants lists the tenants whose admins are global admins
	// (auth.global_admin_tenants); nil = [default].
	GlobalAdminTenants []string
}

// Authenticator turns the `authorization` metadata into an Identity.
type Authenticator struct {
	enabled bool
	mu      sync.RWMutex
	tokens  map[[32]byte]TokenSpec
	jwt     *JWTSpec
	parser  *jwt.Parser
	global  []string // auth.global_admin_tenants
	// verified caches JWTs whose signature and claims were verified
	// (jwtcache.go): a repeat of the same token skips the signature check
	// until the token expires.
	verified *jwtCache
	now      func() time.Time
}

// NewAuthenticator builds an Authenticator. Token hashes must be 64 hex characters.
func NewAuthenticator(o Options) (*Authenticator, error) {
	a := &Authenticator{enabled: o.Enabled, tokens: map[[32]byte]TokenSpec{}, jwt: o.JWT, global: o.GlobalAdminTenants, now: time.Now}
	if a.global == nil {
		a.global = []string{"default"}
	}
	for _, t := range o.Tokens {
		b, err := hex.DecodeString(t.SHA256)
		if err != nil || len(b) != 32 {
			return nil, fmt.Errorf("token %q: sha256 must be 64 hex characters", t.Name)
		}
		a.tokens[[32]byte(b)] = t
	}
	if o.JWT != nil {
		opts := []jwt.ParserOption{jwt.WithExpirationRequired(), jwt.WithLeeway(o.JWT.Leeway)}
		switch {
		case o.JWT.HMACSecret != nil:
			opts = append(opts, jwt.WithValidMethods([]string{"HS256"}))
		case o.JWT.PublicKey != nil:
			switch o.JWT.PublicKey.(type) {
			case *rsa.PublicKey:
				opts = append(opts, jwt.WithValidMethods([]string{"RS256"}))
			case *ecdsa.PublicKey:
				opts = append(opts, jwt.WithValidMethods([]string{"ES256"}))
			default:
				return nil, errors.New("jwt: public key must be RSA or ECDSA")
			}
		default:
			return nil, errors.New("jwt: no key")
		}
		if o.JWT.Issuer != "" {
			opts = append(opts, jwt.WithIssuer(o.JWT.Issuer))
		}
		if o.JWT.Audience != "" {
			opts = append(opts, jwt.WithAudience(o.JWT.Audience))
		}
		a.parser = jwt.NewParser(append(opts, jwt.WithTimeFunc(func() time.Time { return a.now() }))...)
		a.verified = newJWTCache(jwtCacheEntries)
	}
	return a, nil
}

// Enabled reports whether authentication is on.
func (a *Authenticator) Enabled() bool { return a.enabled }

// AddToken registers a plaintext token in memory (hashed at once); used for
// the service token the all-in-one process mints for its own runtime.
func (a *Authenticator) AddToken(name, token string, kind Kind, p *typev1.Principal) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.tokens[sha256.Sum256([]byte(token))] = TokenSpec{Name: name, Kind: kind, Principal: p}
}

// HashToken returns the lowercase hex SHA-256 of a token, as auth.tokens[].sha256 wants it.
func HashToken(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

// ErrorDomain is the google.rpc.ErrorInfo domain of the errors the shared
// interceptors return (authentication, acting-for, RPC classes).
const ErrorDomain = "toolplane.dev"

// Reasons of those errors (ErrorInfo.reason).
const (
	ReasonCredentialMissing  = "CREDENTIAL_MISSING"   // UNAUTHENTICATED: no or malformed authorization metadata
	ReasonCredentialInvalid  = "CREDENTIAL_INVALID"   // UNAUTHENTICATED: unknown token, bad or expired JWT
	ReasonActingForForbidden = "ACTING_FOR_FORBIDDEN" // PERMISSION_DENIED: acting-for from a non-service credential
	ReasonActingForMalformed = "ACTING_FOR_MALFORMED" // PERMISSION_DENIED: unparsable acting-for metadata
	ReasonServiceRequired    = "SERVICE_REQUIRED"     // PERMISSION_DENIED: RPC of class service
	ReasonAdminRequired      = "ADMIN_REQUIRED"       // PERMISSION_DENIED: RPC of class admin
	ReasonNoRPCClass         = "NO_RPC_CLASS"         // PERMISSION_DENIED: RPC missing from its service's class table
)

// Error returns a status error with a google.rpc.ErrorInfo of ErrorDomain.
func Error(code codes.Code, reason, msg string) error {
	st := status.New(code, msg)
	if d, err := st.WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: ErrorDomain}); err == nil {
		st = d
	}
	return st.Err()
}

func unauthenticated(reason, msg string) error { return Error(codes.Unauthenticated, reason, msg) }

// verifiedKey marks a context whose credential a transport-level check
// already verified (see WithVerifiedCredential).
type verifiedKey struct{}

// WithVerifiedCredential records the identity that Credential derived from
// the same RPC's authorization metadata (the gRPC tap does this before the
// request is decoded), so that Authenticate does not verify the credential
// — a JWT signature, say — a second time on the hot path.
func WithVerifiedCredential(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, verifiedKey{}, id)
}

// Credential verifies the `authorization` metadata of ctx only (no
// acting-for). Errors are UNAUTHENTICATED: missing, unknown, malformed,
// expired or badly signed credential.
func (a *Authenticator) Credential(ctx context.Context) (Identity, error) {
	if !a.enabled {
		return Identity{Principal: DefaultPrincipal(), Kind: KindService}, nil
	}
	authz := metadata.ValueFromIncomingContext(ctx, "authorization") // no copy of the whole map
	if len(authz) == 0 {
		return Identity{}, unauthenticated(ReasonCredentialMissing, "missing credential: send `authorization: Bearer <token>`")
	}
	scheme, cred, ok := strings.Cut(strings.TrimSpace(authz[0]), " ")
	if !ok || !strings.EqualFold(scheme, "bearer") || strings.TrimSpace(cred) == "" {
		return Identity{}, unauthenticated(ReasonCredentialMissing, "malformed authorization metadata: want `Bearer <token>`")
	}
	return a.credential(strings.TrimSpace(cred))
}

// Authenticate resolves the caller from incoming metadata: the credential
// (Credential, or the identity WithVerifiedCredential recorded) and the
// acting-for metadata. Errors are UNAUTHENTICATED (see Credential) or
// PERMISSION_DENIED (acting-for metadata from a credential that is not a
// service credential, or malformed acting-for metadata).
func (a *Authenticator) Authenticate(ctx context.Context) (Identity, error) {
	id, ok := ctx.Value(verifiedKey{}).(Identity)
	if !ok {
		var err error
		if id, err = a.Credential(ctx); err != nil {
			return Identity{}, err
		}
	}
	id.GlobalAdmin = id.Admin() && slices.Contains(a.global, tenantOf(id.Principal))
	bin, acting := metadata.ValueFromIncomingContext(ctx, PrincipalHeader), metadata.ValueFromIncomingContext(ctx, ActingForHeader)
	if len(bin) == 0 && len(acting) == 0 {
		return id, nil
	}
	// Only a service credential may act for a user (docs/architecture.md
	// §5); a user credential with the admin role may not (it is not a
	// service). With authentication off the caller is a service
	// (DefaultPrincipal).
	if id.Kind != KindService {
		return Identity{}, Error(codes.PermissionDenied, ReasonActingForForbidden, PrincipalHeader+" and "+ActingForHeader+" metadata are only accepted from service credentials")
	}
	if len(bin)+len(acting) > 1 {
		return Identity{}, Error(codes.PermissionDenied, ReasonActingForMalformed, "name the end user once: one "+PrincipalHeader+" (or, v0.1.x, one "+ActingForHeader+")")
	}
	var (
		p   *typev1.Principal
		err error
		key = PrincipalHeader
	)
	if len(bin) == 1 {
		p, err = DecodePrincipal([]byte(bin[0]))
	} else {
		key = ActingForHeader
		p, err = ParseActingFor(acting[0])
	}
	if err != nil {
		return Identity{}, Error(codes.PermissionDenied, ReasonActingForMalformed, fmt.Sprintf("%s: %v", key, err))
	}
	id.ActingFor = p
	return id, nil
}

func (a *Authenticator) credential(cred string) (Identity, error) {
	sum := sha256.Sum256([]byte(cred))
	a.mu.RLock()
	var found *TokenSpec
	for k, t := range a.tokens {
		if subtle.ConstantTimeCompare(k[:], sum[:]) == 1 {
			t := t
			found = &t
		}
	}
	a.mu.RUnlock()
	if found != nil {
		return Identity{Principal: clonePrincipal(found.Principal), Kind: found.Kind}, nil
	}
	if a.parser != nil && strings.Count(cred, ".") == 2 {
		if id, ok := a.verified.get(sum, a.now()); ok {
			return id, nil
		}
		id, until, err := a.verifyJWT(cred)
		if err == nil {
			a.verified.put(sum, id, until)
		}
		return id, err
	}
	return Identity{}, unauthenticated(ReasonCredentialInvalid, "invalid credential")
}

// verifyJWT checks a JWT's signature and claims; until is when the
// verification stops holding (its exp claim plus the leeway).
func (a *Authenticator) verifyJWT(raw string) (id Identity, until time.Time, err error) {
	claims := jwt.MapClaims{}
	_, err = a.parser.ParseWithClaims(raw, claims, func(t *jwt.Token) (any, error) {
		if a.jwt.HMACSecret != nil {
			return a.jwt.HMACSecret, nil
		}
		return a.jwt.PublicKey, nil
	})
	if err != nil {
		switch {
		case errors.Is(err, jwt.ErrTokenExpired):
			return Identity{}, time.Time{}, unauthenticated(ReasonCredentialInvalid, "invalid JWT: token is expired")
		case errors.Is(err, jwt.ErrTokenSignatureInvalid):
			return Identity{}, time.Time{}, unauthenticated(ReasonCredentialInvalid, "invalid JWT: signature is invalid")
		}
		return Identity{}, time.Time{}, unauthenticated(ReasonCredentialInvalid, "invalid JWT: "+err.Error())
	}
	sub, _ := claims.GetSubject()
	if sub == "" {
		return Identity{}, time.Time{}, unauthenticated(ReasonCredentialInvalid, "invalid JWT: missing sub claim")
	}
	p := &typev1.Principal{Subject: sub, Tenant: "default"}
	if t, ok := claims[a.jwt.TenantClaim].(string); ok && t != "" {
		p.Tenant = t
	}
	if rs, ok := claims[a.jwt.RolesClaim].([]any); ok {
		for _, r := range rs {
			if s, ok := r.(string); ok && s != "" {
				p.Roles = append(p.Roles, s)
			}
		}
	}
	if am, ok := claims[a.jwt.AttributesClaim].(map[string]any); ok {
		p.Attributes = map[string]string{}
		for k, v := range am {
			if s, ok := v.(string); ok {
				p.Attributes[k] = s
			}
		}
	}
	kind := a.jwt.DefaultKind
	if k, ok := claims[a.jwt.KindClaim].(string); ok {
		switch Kind(k) {
		case KindUser, KindService:
			kind = Kind(k)
		default:
			return Identity{}, time.Time{}, unauthenticated(ReasonCredentialInvalid, fmt.Sprintf("invalid JWT: claim %s must be user or service", a.jwt.KindClaim))
		}
	}
	exp, err := claims.GetExpirationTime()
	if err != nil || exp == nil { // the parser requires exp: not reached
		return Identity{}, time.Time{}, unauthenticated(ReasonCredentialInvalid, "invalid JWT: missing exp claim")
	}
	return Identity{Principal: p, Kind: kind}, exp.Add(a.jwt.Leeway), nil
}

func clonePrincipal(p *typev1.Principal) *typev1.Principal {
	if p == nil {
		return nil
	}
	c := &typev1.Principal{Subject: p.Subject, Tenant: p.Tenant, Roles: slices.Clone(p.Roles)}
	if p.Attributes != nil {
		c.Attributes = make(map[string]string, len(p.Attributes))
		for k, v := range p.Attributes {
			c.Attributes[k] = v
		}
	}
	return c
}

// FormatActingFor renders a principal in the v0.1.x ActingForHeader format
// (PrincipalHeader replaces it; ActingForSafe says whether p survives it):
// "tenant/subject" then optional ";roles=a,b" and ";attr.<key>=<value>"
// parts. Subjects, tenants, roles and attributes must not contain ';', ',',
// '=' or '/' (tenant) — ParseActingFor rejects them.
func FormatActingFor(p *typev1.Principal) string {
	var b strings.Builder
	b.WriteString(tenantOf(p))
	b.WriteByte('/')
	b.WriteString(p.GetSubject())
	if len(p.GetRoles()) > 0 {
		b.WriteString(";roles=")
		b.WriteString(strings.Join(p.GetRoles(), ","))
	}
	keys := make([]string, 0, len(p.GetAttributes()))
	for k := range p.GetAttributes() {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		b.WriteString(";attr." + k + "=" + p.GetAttributes()[k])
	}
	return b.String()
}

// actingForReserved are the characters no part of a v0.1.x acting-for
// value may contain: they are its delimiters, so a value holding one
// could be read as another principal.
const actingForReserved = ";,=/"

// ActingForSafe reports whether p can be written in the v0.1.x
// ActingForHeader form and read back unchanged: no part contains one of
// ; , = / and the subject is not empty.
func ActingForSafe(p *typev1.Principal) bool {
	if p.GetSubject() == "" || strings.ContainsAny(p.GetSubject(), actingForReserved) || strings.ContainsAny(p.GetTenant(), actingForReserved) {
		return false
	}
	for _, r := range p.GetRoles() {
		if r == "" || strings.ContainsAny(r, actingForReserved) {
			return false
		}
	}
	for k, v := range p.GetAttributes() {
		if k == "" || strings.ContainsAny(k, actingForReserved) || strings.ContainsAny(v, actingForReserved) {
			return false
		}
	}
	return true
}

// Bounds of a principal named by a service credential.
const (
	maxPrincipalBytes = 64 << 10 // the serialized message
	maxNameBytes      = 256      // subject, tenant
	maxRoles          = 64
	maxAttributes     = 64
)

// EncodePrincipal serializes p for PrincipalHeader (deterministic).
func EncodePrincipal(p *typev1.Principal) []byte {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(p)
	if err != nil {
		// Only invalid UTF-8 in a string field fails; a verified principal
		// has none (credentials are parsed from UTF-8 JSON or config).
		return nil
	}
	return b
}

// DecodePrincipal parses a PrincipalHeader value: a serialized Principal
// with a non-empty subject, bounded sizes and valid UTF-8; any value is
// otherwise kept exactly as sent. An empty tenant is "default".
func DecodePrincipal(b []byte) (*typev1.Principal, error) {
	if len(b) > maxPrincipalBytes {
		return nil, fmt.Errorf("larger than %d bytes", maxPrincipalBytes)
	}
	p := &typev1.Principal{}
	if err := proto.Unmarshal(b, p); err != nil {
		return nil, errors.New("not a serialized toolplane.type.v1.Principal")
	}
	switch {
	case p.GetSubject() == "":
		return nil, errors.New("subject must not be empty")
	case len(p.GetSubject()) > maxNameBytes || len(p.GetTenant()) > maxNameBytes:
		return nil, fmt.Errorf("tenant and subject must be at most %d bytes", maxNameBytes)
	case len(p.GetRoles()) > maxRoles || len(p.GetAttributes()) > maxAttributes:
		return nil, fmt.Errorf("at most %d roles and %d attributes", maxRoles, maxAttributes)
	}
	if p.Tenant == "" {
		p.Tenant = "default"
	}
	return p, nil
}

// ParseActingFor parses the v0.1.x ActingForHeader value (see
// FormatActingFor). A part holding one of ; , = / (beyond the delimiters
// themselves) is refused rather than read in some way.
func ParseActingFor(v string) (*typev1.Principal, error) {
	parts := strings.Split(v, ";")
	tenant, subject, ok := strings.Cut(parts[0], "/")
	if !ok || tenant == "" || subject == "" {
		return nil, errors.New(`want "tenant/subject[;roles=a,b][;attr.k=v]"`)
	}
	if len(subject) > 256 || len(tenant) > 256 {
		return nil, errors.New("tenant and subject must be at most 256 bytes")
	}
	p := &typev1.Principal{Subject: subject, Tenant: tenant}
	for _, part := range parts[1:] {
		k, val, ok := strings.Cut(part, "=")
		switch {
		case !ok:
			return nil, fmt.Errorf("part %q: want key=value", part)
		case k == "roles":
			if p.Roles != nil {
				return nil, errors.New("roles given twice")
			}
			p.Roles = []string{}
			for _, r := range strings.Split(val, ",") {
				if r = strings.TrimSpace(r); r != "" {
					p.Roles = append(p.Roles, r)
				}
			}
		case strings.HasPrefix(k, "attr.") && len(k) > 5:
			if p.Attributes == nil {
				p.Attributes = map[string]string{}
			}
			if _, dup := p.Attributes[k[5:]]; dup {
				return nil, fmt.Errorf("attribute %q given twice", k[5:])
			}
			p.Attributes[k[5:]] = val
		default:
			return nil, fmt.Errorf("unknown part %q", k)
		}
	}
	if !ActingForSafe(p) {
		return nil, fmt.Errorf("a part contains one of %q; send the principal as %s", actingForReserved, PrincipalHeader)
	}
	return p, nil
}

// LoadPublicKey reads a PEM RSA or EC public key (PKIX, or an X.509 certificate).
func LoadPublicKey(path string) (any, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, fmt.Errorf("%s: no PEM block", path)
	}
	switch block.Type {
	case "CERTIFICATE":
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return cert.PublicKey, nil
	case "RSA PUBLIC KEY":
		return x509.ParsePKCS1PublicKey(block.Bytes)
	default:
		k, err := x509.ParsePKIXPublicKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return k, nil
	}
}
