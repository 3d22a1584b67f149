// Command oauthfixture serves the local OAuth authorization server and the
// OAuth-protected streamable-HTTP MCP server of
// services/catalog/catalogoauth/oauthtest on loopback, for trying the
// catalog's OAuth by hand (README, "Connecting an OAuth-protected MCP
// server"; scripts/oauth-demo.sh). It prints the two URLs and the
// client_credentials client, and runs until interrupted.
//
// `oauthfixture browse URL USER` plays the user's browser instead: it opens
// an authorization URL, approves the consent page as USER, follows the
// redirects to the catalog's callback, prints what its confirmation page
// asks, confirms it as the user would (docs/decisions/0127-oauth-callback-confirmation.md)
// and prints the answer.
package main

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/toolplane/toolplane/services/catalog/catalogoauth/oauthtest"
)

// text is the text of body's first <tag ...> element (tags stripped,
// spaces collapsed), or the whole body's text.
func text(body, tag string) string {
	if i := strings.Index(body, "<"+tag+">"); i >= 0 {
		body = body[i:]
		if j := strings.Index(body, "</p>"); j >= 0 {
			body = body[:j]
		}
	}
	return strings.Join(strings.Fields(html.UnescapeString(tagRE.ReplaceAllString(body, ""))), " ")
}

var tagRE = regexp.MustCompile(`<[^>]*>`)

func main() {
	if len(os.Args) == 4 && os.Args[1] == "browse" {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		hc := &http.Client{Timeout: 10 * time.Second}
		p, err := oauthtest.Consent(ctx, hc, os.Args[2], os.Args[3])
		if err != nil {
			fmt.Fprintln(os.Stderr, "oauthfixture browse:", err)
			os.Exit(1)
		}
		st, body := p.Status, p.Body
		if p.NeedsConfirm() {
			fmt.Printf("(browser, HTTP %d) %s [Confirm]\n", st, text(body, "p"))
			if st, body, err = oauthtest.Confirm(ctx, hc, p); err != nil {
				fmt.Fprintln(os.Stderr, "oauthfixture browse:", err)
				os.Exit(1)
			}
		}
		fmt.Printf("(browser, HTTP %d) %s\n", st, text(body, `p id="message"`))
		if st != 200 {
			os.Exit(1)
		}
		return
	}
	if len(os.Args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: oauthfixture | oauthfixture browse AUTHORIZATION_URL USER")
		os.Exit(2)
	}
	f := oauthtest.New()
	defer f.Close()
	fmt.Printf("mcp server:           %s\nauthorization server: %s\ntoken endpoint:       %s/token\nclient_credentials:   client_id %s, secret %s\n",
		f.URL(), f.AS.URL, f.AS.URL, f.CCClientID, f.CCClientSecret)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	<-ch
}
