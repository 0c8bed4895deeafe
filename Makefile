# agentd: `make run` starts the service on loopback with the builtin
# intelligence; `make test` runs every test. Nothing here needs a manual step.
GO       ?= go
BIN      := bin/agentd
LISTEN   ?= 127.0.0.1:8080
FUZZTIME ?= 20s

.PHONY: all build run test lint vet fmt-check unit fuzz bench clean test-spire spire

all: build

build:
	$(GO) build -o $(BIN) ./cmd/agentd

run: build
	./$(BIN) serve --listen $(LISTEN)

# test: formatting, vet, then every package with the race detector.
test: lint unit

lint: fmt-check vet

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

unit:
	$(GO) test -race -count=1 -timeout 12m ./...

# fuzz: run each fuzz target for FUZZTIME (the seed corpora under testdata/
# run on every `make test`).
fuzz:
	$(GO) test ./api -run '^$$' -fuzz FuzzReadFrame -fuzztime $(FUZZTIME)
	$(GO) test ./server -run '^$$' -fuzz FuzzJSONRPC -fuzztime $(FUZZTIME)
	$(GO) test ./server -run '^$$' -fuzz FuzzParseTokens -fuzztime $(FUZZTIME)
	$(GO) test ./tlsconfig -run '^$$' -fuzz FuzzParsePolicy -fuzztime $(FUZZTIME)

# test-spire: a real SPIRE server and agent on 127.0.0.1 issue the SVIDs of two
# agentd services that call each other over mTLS. spire-server and spire-agent
# are built once from the Go module proxy (tools/spire, its own module) into
# $$HOME/.cache/agentd-spire (about 25 minutes the first time on 2 cores).
spire:
	@bash tools/spire/build.sh >/dev/null

test-spire: spire
	AGENTD_SPIRE_BIN="$$(bash tools/spire/build.sh)" $(GO) test -race -count=1 -tags spire -run '^TestSPIRE$$' -v -timeout 10m ./e2e

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

clean:
	rm -rf bin
