package egress

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestCheckAddr(t *testing.T) {
	var p Policy
	for _, a := range []string{"127.0.0.1", "127.1.2.3", "10.0.0.1", "172.16.5.4", "192.168.1.1", "169.254.169.254", "100.100.100.200",
		"100.64.0.1", "0.0.0.0", "::1", "::", "fe80::1", "fd00::1", "::ffff:127.0.0.1", "::ffff:169.254.169.254", "64:ff9b::a9fe:a9fe", "224.0.0.1", "255.255.255.255"} {
		if err := p.CheckAddr(netip.MustParseAddr(a)); !errors.Is(err, ErrDenied) {
			t.Errorf("%s: %v, want denied", a, err)
		}
	}
	for _, a := range []string{"8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "151.101.1.69"} {
		if err := p.CheckAddr(netip.MustParseAddr(a)); err != nil {
			t.Errorf("%s: %v", a, err)
		}
	}
	allow := Policy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	if err := allow.CheckAddr(netip.MustParseAddr("127.0.0.1")); err != nil {
		t.Errorf("allowed loopback: %v", err)
	}
	if err := allow.CheckAddr(netip.MustParseAddr("169.254.169.254")); err == nil {
		t.Error("allowing loopback allowed the metadata address")
	}
}

func TestCheckURL(t *testing.T) {
	var p Policy
	ctx := context.Background()
	for _, u := range []string{"http://127.0.0.1:8080/mcp", "http://[::1]/", "http://169.254.169.254/latest/meta-data/", "http://localhost:1/",
		"file:///etc/passwd", "gopher://x/", "http://user:pw@example.invalid/", "http:///nohost", "http://0x7f000001/", "http://2130706433/"} {
		if err := p.CheckURL(ctx, u); !errors.Is(err, ErrDenied) {
			t.Errorf("%s: %v, want denied", u, err)
		}
	}
	if err := (&Policy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}}).CheckURL(ctx, "http://localhost:1/"); err != nil {
		t.Errorf("localhost with loopback allowed: %v", err)
	}
}

// TestClientAgainstLoopback: against real loopback servers, with the deny
// rules on nothing is reached (the handler never runs) — neither directly,
// nor by a name that resolves to loopback, nor through a redirect from an
// allowed server; with loopback explicitly allowed the same calls work, and
// size and time limits hold.
func TestClientAgainstLoopback(t *testing.T) {
	var hits atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		switch r.URL.Path {
		case "/big":
			io.WriteString(w, strings.Repeat("x", 5000))
		case "/slow":
			time.Sleep(800 * time.Millisecond)
		default:
			io.WriteString(w, "ok")
		}
	}))
	defer target.Close()
	port := target.Listener.Addr().(*net.TCPAddr).Port
	deny := Policy{Timeout: 500 * time.Millisecond}
	c := deny.Client()
	for _, u := range []string{target.URL + "/", strings.Replace(target.URL, "127.0.0.1", "localhost", 1) + "/", "http://[::ffff:127.0.0.1]:" + strconv.Itoa(port) + "/"} {
		resp, err := c.Get(u)
		if err == nil {
			resp.Body.Close()
			t.Errorf("%s reached with loopback denied", u)
		} else if !errors.Is(err, ErrDenied) {
			t.Errorf("%s: %v, want ErrDenied", u, err)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the loopback handler ran %d times with the deny rules on", n)
	}

	allowed := Policy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}, MaxResponseBytes: 1000, Timeout: 300 * time.Millisecond}
	ca := allowed.Client()
	resp, err := ca.Get(target.URL + "/")
	if err != nil {
		t.Fatalf("loopback allowed: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "ok" {
		t.Fatalf("body %q", b)
	}
	resp, err = ca.Get(target.URL + "/big")
	if err == nil {
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	if !errors.Is(err, ErrTooLarge) {
		t.Errorf("5000-byte body with a 1000-byte limit: %v", err)
	}
	start := time.Now()
	if resp, err := ca.Get(target.URL + "/slow"); err == nil {
		resp.Body.Close()
		t.Error("slow response within a 300 ms timeout")
	}
	if d := time.Since(start); d > 700*time.Millisecond {
		t.Errorf("timeout took %s", d)
	}

	// A redirect to a denied address is refused even when the first hop is
	// allowed: only 127.0.0.2 is allowed here, it redirects to 127.0.0.1.
	before := hits.Load()
	hop, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("127.0.0.2 not available: %v", err)
	}
	rs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/", http.StatusFound)
	})}
	go rs.Serve(hop)
	defer rs.Close()
	one := Policy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")}}
	resp, err = one.Client().Get("http://" + hop.Addr().String() + "/")
	if err == nil {
		resp.Body.Close()
		t.Fatal("redirect to a denied address followed")
	}
	if !errors.Is(err, ErrDenied) || hits.Load() != before {
		t.Fatalf("redirect: %v; target handler ran %d times", err, hits.Load()-before)
	}
}

func TestParsePrefixes(t *testing.T) {
	got, err := ParsePrefixes("x.allow", []string{"127.0.0.0/8", "10.1.2.3", "::1"})
	if err != nil || len(got) != 3 || got[1].Bits() != 32 {
		t.Fatalf("%v %v", got, err)
	}
	if _, err := ParsePrefixes("x.allow", []string{"nope"}); err == nil || !strings.Contains(err.Error(), "x.allow[0]") {
		t.Fatalf("%v", err)
	}
}
