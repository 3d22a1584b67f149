// Command oauthfixture serves the local OAuth authorization server and the
// OAuth-protected streamable-HTTP MCP server of
// services/catalog/catalogoauth/oauthtest on loopback, for trying the
// catalog's OAuth by hand (README, "Connecting an OAuth-protected MCP
// server"). It prints the two URLs and the client_credentials client, and
// runs until interrupted.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/toolplane/toolplane/services/catalog/catalogoauth/oauthtest"
)

func main() {
	f := oauthtest.New()
	defer f.Close()
	fmt.Printf("mcp server:           %s\nauthorization server: %s\ntoken endpoint:       %s/token\nclient_credentials:   client_id %s, secret %s\n",
		f.URL(), f.AS.URL, f.AS.URL, f.CCClientID, f.CCClientSecret)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	<-ch
}
