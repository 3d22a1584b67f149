// Command oauthfixture serves the local OAuth authorization server and the
// OAuth-protected streamable-HTTP MCP server of
// services/catalog/catalogoauth/oauthtest on loopback, for trying the
// catalog's OAuth by hand (README, "Connecting an OAuth-protected MCP
// server"; scripts/oauth-demo.sh). It prints the two URLs and the
// client_credentials client, and runs until interrupted.
//
// `oauthfixture browse URL USER` plays the user's browser instead: it opens
// an authorization URL, approves the consent page as USER, follows the
// redirects to the catalog's callback and prints the callback's answer.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/toolplane/toolplane/services/catalog/catalogoauth/oauthtest"
)

func main() {
	if len(os.Args) == 4 && os.Args[1] == "browse" {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		st, body, err := oauthtest.Browse(ctx, os.Args[2], os.Args[3])
		if err != nil {
			fmt.Fprintln(os.Stderr, "oauthfixture browse:", err)
			os.Exit(1)
		}
		fmt.Printf("(browser, HTTP %d) %s", st, body)
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
