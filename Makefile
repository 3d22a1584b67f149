# Toolplane — make targets. `make help` lists them.
SHELL := /bin/bash
BUF   := go tool -modfile=tools/go.mod buf
GO    ?= go
export CGO_ENABLED ?= 0

.DEFAULT_GOAL := help

.PHONY: help
help: ## list targets
	@grep -hE '^[a-zA-Z0-9_-]+:.*?## ' $(MAKEFILE_LIST) | awk -F':.*?## ' '{printf "  %-18s %s\n", $$1, $$2}'

.PHONY: generate
generate: ## format protos and regenerate gen/ (Go, gateway, merged OpenAPI), clients/ stubs and the served spec
	$(BUF) format -w proto
	@command -v protoc >/dev/null && command -v grpc_python_plugin >/dev/null || { \
	  echo "generate: protoc and grpc_python_plugin are needed (apt-get install protobuf-compiler protobuf-compiler-grpc)"; exit 1; }
	ts=$$(clients/ts/install.sh) && \
	  $(BUF) generate && \
	  g=$$ts/node_modules/google-proto-files && \
	  $(BUF) generate $$g --template buf.gen.googleapis.yaml --path $$g/google/rpc/status.proto --path $$g/google/rpc/error_details.proto
	$(GO) run ./internal/openapispec/postprocess gen/openapi/toolplane.swagger.json internal/gateway/openapi.json

GENERATED := gen internal/gateway/openapi.json clients/python/toolplane_client/gen clients/ts/gen

.PHONY: check-generated
check-generated: generate ## regenerate and fail if gen/ or clients/*/gen differ from what is committed
	@git add -N $(GENERATED) >/dev/null 2>&1 || true
	@if ! git diff --quiet -- $(GENERATED); then \
	  echo "check-generated: generated code is out of date with proto/ (run make generate and commit):"; \
	  git diff --stat -- $(GENERATED); exit 1; fi
	@echo "check-generated: gen/ and clients/*/gen are up to date"

.PHONY: lint
lint: ## go vet, buf lint, buf format check
	$(GO) vet ./...
	$(BUF) lint
	$(BUF) format -d --exit-code proto

.PHONY: breaking
breaking: ## buf breaking + http.yaml diff against the release baseline (report-only before the first release)
	scripts/breaking.sh

.PHONY: build
build: ## build bin/toolplane (static, CGO off)
	$(GO) build -trimpath -ldflags "-s -w -X github.com/toolplane/toolplane/internal/version.Version=$$(git describe --tags --always --dirty 2>/dev/null || echo dev)" -o bin/toolplane ./cmd/toolplane

.PHONY: deps
deps: ## install the pinned npm MCP servers the tests and the example use (into .tools/, git-ignored)
	scripts/install-npm.sh

.PHONY: test
test: deps ## unit, handler, store and contract tests with -race
	CGO_ENABLED=1 $(GO) test -race -count=1 -timeout 30m ./...

.PHONY: test-corpus
test-corpus: deps ## the provider profiles over the whole real schema corpus (go test runs a stratified sample under -race)
	TOOLPLANE_CORPUS_FULL=1 $(GO) test -count=1 -run 'TestCorpus' -v ./services/runtime/runtimeschema/ | grep -v '^=== RUN'

.PHONY: test-read-paging
test-read-paging: deps ## read_file followed page by page to the end of a 20 MiB file (go test reads 2 MiB of the same shape)
	TOOLPLANE_READ_FULL=1 $(GO) test -count=1 -timeout 30m -run 'TestReadFileFollowHintsToTheEnd' -v ./services/runtime/runtimetools/

.PHONY: test-e2e
test-e2e: deps ## end-to-end tests: the real binary on loopback ports, both topologies
	CGO_ENABLED=1 $(GO) test -race -count=1 -tags e2e -timeout 20m ./tests/e2e/...

.PHONY: test-multinode-long
test-multinode-long: deps ## the multi-node kill test, long form: 7 processes on PostgreSQL, SIGKILL cycles under load for 2m30s (TOOLPLANE_MULTINODE_LOAD, at most 4m; about 4 min in all)
	TOOLPLANE_MULTINODE=long $(GO) test -count=1 -tags e2e -timeout 10m -v -run 'TestMultiNodeKill$$' ./tests/e2e/

.PHONY: run
run: build ## all-in-one on sqlite in ./data, no MCP servers
	bin/toolplane serve --data-dir ./data

.PHONY: demo
demo: ## the main job: install the npm MCP servers and run the all-in-one suite on examples/
	scripts/demo.sh

.PHONY: oauth-demo
oauth-demo: ## connect OAuth-protected MCP servers as an admin and as a user against the local fixture (the README's output)
	scripts/oauth-demo.sh

.PHONY: bench
bench: ## benchmarks (ratios against in-run baselines)
	$(GO) test -run '^$$' -bench . -benchmem ./bench/... ./internal/search/... ./services/...

.PHONY: bench-e2e
bench-e2e: deps ## long end-to-end benchmarks: the real binary on loopback, scaling 500..100k tools, hops, RSS (docs/performance.md)
	TOOLPLANE_BENCH_E2E=long $(GO) test -tags benche2e -count=1 -v -timeout 60m -run TestLong ./bench/e2e/

.PHONY: bench-e2e-short
bench-e2e-short: deps ## CI form of bench-e2e: 8,010 tools, median of 3, fails only on a ratio regression > 25% (bench/e2e/baseline.json); PostgreSQL beside sqlite, two runtimes vs one (>= 0.9x)
	TOOLPLANE_BENCH_E2E=short $(GO) test -tags benche2e -count=1 -v -timeout 10m -run TestShort ./bench/e2e/

.PHONY: bench-e2e-pg
bench-e2e-pg: deps ## PostgreSQL beside sqlite (8,010 tools, median of 3) and two runtimes vs one on one database (docs/performance.md "On PostgreSQL")
	TOOLPLANE_BENCH_E2E=long $(GO) test -tags benche2e -count=1 -v -timeout 30m -run TestLongPostgres ./bench/e2e/

.PHONY: vectors
vectors: ## rebuild the static word vectors of internal/search (apt fasttext + wordnet; THREADS=1 for a reproducible run)
	scripts/vectors/build.sh

.PHONY: eval
eval: build ## search evaluation on the toolret DEV sets
	scripts/eval.sh
