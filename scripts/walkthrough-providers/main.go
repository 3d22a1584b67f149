// Command walkthrough-providers is the provider walk-through of the README
// ("Calling a provider yourself"): an application that calls each model
// provider itself and uses Toolplane over REST for its tools —
// AssembleTools with the provider's profile, the provider request built
// from the bound forms, ExecuteToolCall of the model's tool search, the
// next request with the provider-native search result, the promoted tool's
// call — against the strict local fake of each provider
// (services/runtime/runtimeloop/providerflow). Any request a fake refuses
// fails the run. Started by scripts/walkthrough-providers.sh.
//
//	walkthrough-providers -http http://127.0.0.1:7421 -token tp-demo-editor
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	runtimev1 "github.com/toolplane/toolplane/gen/go/toolplane/runtime/v1"
	"github.com/toolplane/toolplane/services/runtime/runtimeloop/providerflow"
)

// rest is providerflow's Backend over Toolplane's REST gateway.
type rest struct {
	base, token string
	client      *http.Client
}

func (r rest) call(ctx context.Context, path string, in, out proto.Message) error {
	body, err := protojson.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.base+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+r.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: HTTP %d: %s", path, resp.StatusCode, b)
	}
	return protojson.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(b, out)
}

func (r rest) NewThread(ctx context.Context) (string, error) {
	var out runtimev1.CreateThreadResponse
	if err := r.call(ctx, "/v1/threads", &runtimev1.CreateThreadRequest{}, &out); err != nil {
		return "", err
	}
	return out.GetThread().GetThreadId(), nil
}

func (r rest) Assemble(ctx context.Context, th string, p runtimev1.ToolProfile) (*runtimev1.AssembleToolsResponse, error) {
	var out runtimev1.AssembleToolsResponse
	err := r.call(ctx, "/v1/threads/"+th+":assemble", &runtimev1.AssembleToolsRequest{Profile: p, UserMessage: "What is 2 + 3?"}, &out)
	return &out, err
}

func (r rest) Execute(ctx context.Context, th string, p runtimev1.ToolProfile, c *runtimev1.ToolCall) (*runtimev1.ToolResult, error) {
	var out runtimev1.ExecuteToolCallResponse
	err := r.call(ctx, "/v1/threads/"+th+":executeToolCall", &runtimev1.ExecuteToolCallRequest{Profile: p, ToolCall: c}, &out)
	return out.GetResult(), err
}

func main() {
	base := flag.String("http", "http://127.0.0.1:7421", "Toolplane's REST address")
	token := flag.String("token", "tp-demo-editor", "bearer token")
	providers := flag.String("providers", strings.Join(providerflow.Providers, ","), "flows to run")
	query := flag.String("query", "select:everything_get-sum", "the model's tool_search query")
	tool := flag.String("tool", "everything_get-sum", "the promoted tool the model calls")
	args := flag.String("args", `{"a":2,"b":3}`, "its arguments")
	want := flag.String("want", "The sum of 2 and 3 is 5.", "the tool result expected")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b := rest{base: strings.TrimRight(*base, "/"), token: *token, client: &http.Client{Timeout: 20 * time.Second}}
	sc := providerflow.Script{Prompt: "What is 2 + 3?", Query: *query, Tool: *tool, Args: *args}
	failed := 0
	for _, p := range strings.Split(*providers, ",") {
		fmt.Printf("\n== %s\n", p)
		tr, err := providerflow.Run(ctx, b, p, sc)
		if tr != nil {
			for _, l := range tr.Log {
				fmt.Println("  " + l)
			}
		}
		switch {
		case err != nil:
			fmt.Printf("  FAILED: %v\n", err)
			failed++
		case tr.ToolResult != *want:
			fmt.Printf("  FAILED: the tool said %q, want %q\n", tr.ToolResult, *want)
			failed++
		default:
			fmt.Printf("  ok: %d provider requests, none refused by the strict fake; largest %d bytes\n", len(tr.Exchanges), tr.LargestRequest)
		}
	}
	if failed > 0 {
		fmt.Printf("\nwalkthrough-providers: %d of %d flows failed\n", failed, len(strings.Split(*providers, ",")))
		os.Exit(1)
	}
	fmt.Printf("\nwalkthrough-providers: %d flows passed\n", len(strings.Split(*providers, ",")))
}
