// Package egress is the one policy for network connections Toolplane opens
// on a user's behalf (HTTP and SSE MCP servers added through the API, tools
// that fetch URLs): loopback, link-local, private, shared, multicast and
// cloud-metadata destinations are refused unless a global admin's
// configuration allows them; the check runs on the URL, again on every
// address at dial time (after DNS resolution, so a name that resolves to a
// private address is refused), and again on every redirect; responses are
// bounded in size and time (docs/architecture.md §5, decision 0134).
package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// Policy says which destinations may be reached. The zero value denies every
// range in DeniedRanges and allows the rest of the internet.
type Policy struct {
	// Allow lists prefixes reachable although they are in DeniedRanges
	// (e.g. 127.0.0.0/8 for a local MCP server, 10.1.2.0/24 for an internal
	// one). Set only by a global admin's configuration.
	Allow []netip.Prefix
	// MaxResponseBytes bounds a response body (0 = 16 MiB).
	MaxResponseBytes int64
	// Timeout bounds one request including the body (0 = 30 s); DialTimeout
	// one connection attempt (0 = 10 s).
	Timeout, DialTimeout time.Duration
	// MaxRedirects bounds redirects (0 = 5; each one is checked).
	MaxRedirects int
	// Resolver resolves names for CheckURL (nil = net.DefaultResolver).
	Resolver *net.Resolver
}

// DeniedRanges are refused unless allowed: loopback, "this network",
// RFC 1918 private, carrier-grade NAT (RFC 6598), link-local (169.254/16,
// including the cloud metadata endpoint 169.254.169.254, and fe80::/10),
// unique local (fc00::/7), benchmarking (198.18/15), IETF protocol
// assignments, multicast, reserved and broadcast, IPv4-mapped and NAT64
// forms of them, and Alibaba's metadata address 100.100.100.200 (inside
// 100.64/10).
var DeniedRanges = mustPrefixes(
	"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
	"192.0.0.0/24", "192.0.2.0/24", "192.168.0.0/16", "198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24",
	"224.0.0.0/4", "240.0.0.0/4", "255.255.255.255/32",
	"::/128", "::1/128", "fc00::/7", "fe80::/10", "ff00::/8", "64:ff9b::/96", "64:ff9b:1::/48", "2001:db8::/32", "fec0::/10",
)

func mustPrefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

// ErrDenied wraps every refusal.
var ErrDenied = errors.New("egress denied")

// CheckAddr refuses an address in DeniedRanges that Allow does not cover.
// IPv4-mapped IPv6 addresses are checked as IPv4.
func (p *Policy) CheckAddr(a netip.Addr) error {
	a = a.Unmap()
	if !a.IsValid() {
		return fmt.Errorf("%w: invalid address", ErrDenied)
	}
	for _, al := range p.Allow {
		if al.Contains(a) {
			return nil
		}
	}
	for _, d := range DeniedRanges {
		if d.Contains(a) {
			return fmt.Errorf("%w: %s is in %s (loopback, private, link-local, metadata or reserved); not allowed by the egress policy", ErrDenied, a, d)
		}
	}
	return nil
}

// CheckURL checks a URL before it is stored or used: scheme http or https,
// a host, no user info, and every address the host resolves to allowed. The
// dial-time check (Client) repeats the address check on the address actually
// dialled, so a DNS answer that changes later (rebinding) is refused too.
func (p *Policy) CheckURL(ctx context.Context, raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrDenied, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("%w: scheme %q (want http or https)", ErrDenied, u.Scheme)
	}
	if u.User != nil {
		return fmt.Errorf("%w: credentials in the URL are not allowed", ErrDenied)
	}
	host := u.Hostname()
	if host == "" {
		return fmt.Errorf("%w: no host", ErrDenied)
	}
	if a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")); err == nil {
		return p.CheckAddr(a)
	}
	r := p.Resolver
	if r == nil {
		r = net.DefaultResolver
	}
	ctx, cancel := context.WithTimeout(ctx, p.dialTimeout())
	defer cancel()
	addrs, err := r.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return fmt.Errorf("%w: resolve %s: %v", ErrDenied, host, err)
	}
	for _, a := range addrs {
		if err := p.CheckAddr(a); err != nil {
			return fmt.Errorf("%s: %w", host, err)
		}
	}
	return nil
}

func (p *Policy) dialTimeout() time.Duration {
	if p.DialTimeout > 0 {
		return p.DialTimeout
	}
	return 10 * time.Second
}

// Dialer returns a net.Dialer whose Control refuses denied addresses: it
// runs after DNS resolution, on each address about to be connected.
func (p *Policy) Dialer() *net.Dialer {
	return &net.Dialer{Timeout: p.dialTimeout(), Control: func(network, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return fmt.Errorf("%w: dial %s: %v", ErrDenied, address, err)
		}
		return p.CheckAddr(ap.Addr())
	}}
}

// Client returns an HTTP client that dials through Dialer (no proxy from
// the environment: a proxy would hide the destination), re-checks every
// redirect's URL, and bounds time and response size.
func (p *Policy) Client() *http.Client {
	timeout := p.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	maxRedirects := p.MaxRedirects
	if maxRedirects <= 0 {
		maxRedirects = 5
	}
	tr := &http.Transport{
		Proxy:                  nil,
		DialContext:            p.Dialer().DialContext,
		TLSHandshakeTimeout:    p.dialTimeout(),
		ResponseHeaderTimeout:  timeout,
		MaxResponseHeaderBytes: 64 << 10,
		ForceAttemptHTTP2:      true,
	}
	return &http.Client{
		Timeout:   timeout,
		Transport: &limitTransport{rt: tr, max: p.maxBytes()},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= maxRedirects {
				return fmt.Errorf("%w: more than %d redirects", ErrDenied, maxRedirects)
			}
			return p.CheckURL(req.Context(), req.URL.String())
		},
	}
}

// StreamingClient is Client for MCP transports: no overall request timeout
// and no response-header timeout (a tool call's answer may take as long as
// the caller's context allows; the caller bounds it), SSE responses
// (text/event-stream) not size-bounded as a whole (the MCP client bounds each
// message); dial and TLS timeouts, the address checks and the redirect
// checks still apply.
func (p *Policy) StreamingClient() *http.Client {
	c := p.Client()
	c.Timeout = 0
	lt := c.Transport.(*limitTransport)
	tr := lt.rt.(*http.Transport).Clone()
	tr.ResponseHeaderTimeout = 0
	c.Transport = &limitTransport{rt: tr, max: lt.max, streams: true}
	return c
}

func (p *Policy) maxBytes() int64 {
	if p.MaxResponseBytes > 0 {
		return p.MaxResponseBytes
	}
	return 16 << 20
}

// ErrTooLarge is returned by a response body read past MaxResponseBytes.
var ErrTooLarge = errors.New("egress: response larger than the limit")

type limitTransport struct {
	rt      http.RoundTripper
	max     int64
	streams bool // leave text/event-stream bodies unbounded
}

func (t *limitTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.rt.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if t.streams && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return resp, nil
	}
	if resp.ContentLength > t.max {
		resp.Body.Close()
		return nil, fmt.Errorf("%w: Content-Length %d > %d", ErrTooLarge, resp.ContentLength, t.max)
	}
	resp.Body = &limitBody{rc: resp.Body, left: t.max}
	return resp, nil
}

type limitBody struct {
	rc   io.ReadCloser
	left int64
}

func (b *limitBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One byte more tells a body exactly at the limit from a longer one.
		var one [1]byte
		n, err := b.rc.Read(one[:])
		if n > 0 {
			return 0, ErrTooLarge
		}
		return 0, err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *limitBody) Close() error { return b.rc.Close() }

// ParsePrefixes parses allow entries (CIDR prefixes or single addresses);
// the error names the entry's index under field.
func ParsePrefixes(field string, ss []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(ss))
	for i, s := range ss {
		if pr, err := netip.ParsePrefix(s); err == nil {
			out = append(out, pr.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("%s[%d]: %q is not a CIDR prefix or an IP address", field, i, s)
		}
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}
