# agentd: `make run` starts the service on loopback with the builtin
# intelligence; `make test` runs every test. Nothing here needs a manual step.
GO       ?= go
BIN      := bin/agentd
LISTEN   ?= 127.0.0.1:8080
FUZZTIME ?= 20s

.PHONY: all build run test lint vet fmt-check unit deploy-test fuzz bench clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/agentd

run: build
	./$(BIN) serve --listen $(LISTEN)

# test: formatting, vet, then every package with the race detector, then the
# offline validation of deploy/.
test: lint unit deploy-test

lint: fmt-check vet

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

unit:
	$(GO) test -race -count=1 -timeout 12m ./...

# deploy-test: deploy/ is a module of its own (the Kubernetes libraries stay
# out of the main module): it renders the kustomizations, decodes every object
# strictly, runs the PodSecurity "restricted" checks and checks the Dockerfile.
deploy-test:
	cd deploy && $(GO) vet ./... && $(GO) test -count=1 -timeout 10m ./...

# fuzz: run each fuzz target for FUZZTIME (the seed corpora under testdata/
# run on every `make test`).
fuzz:
	$(GO) test ./api -run '^$$' -fuzz FuzzReadFrame -fuzztime $(FUZZTIME)
	$(GO) test ./server -run '^$$' -fuzz FuzzJSONRPC -fuzztime $(FUZZTIME)
	$(GO) test ./agent -run '^$$' -fuzz FuzzParseScript -fuzztime $(FUZZTIME)

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

clean:
	rm -rf bin

# e2e-mcp-deps: the reference MCP server (@modelcontextprotocol/server-everything,
# pinned in e2e/mcp/package-lock.json) for the MCP e2e tests, installed with
# `npm ci` into e2e/mcp/node_modules (gitignored); again only when the lock
# changes. Needs node and npm.
.PHONY: e2e-mcp-deps fuzz-mcp
unit: e2e-mcp-deps
e2e-mcp-deps: e2e/mcp/node_modules/.package-lock.json
e2e/mcp/node_modules/.package-lock.json: e2e/mcp/package.json e2e/mcp/package-lock.json
	cd e2e/mcp && npm ci --no-audit --no-fund
	touch $@

fuzz: fuzz-mcp
fuzz-mcp:
	$(GO) test ./mcp -run '^$$' -fuzz FuzzParseServer -fuzztime $(FUZZTIME)
	$(GO) test ./mcp -run '^$$' -fuzz FuzzParseTags -fuzztime $(FUZZTIME)
	$(GO) test ./mcp -run '^$$' -fuzz FuzzParseToolList -fuzztime $(FUZZTIME)
