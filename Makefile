# agentd: `make run` starts the service on loopback with the builtin
# intelligence; `make test` runs every test. Nothing here needs a manual step.
GO       ?= go
BIN      := bin/agentd
LISTEN   ?= 127.0.0.1:8080
FUZZTIME ?= 20s

.PHONY: all build run test lint vet fmt-check unit fuzz bench clean

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
	$(GO) test ./a2a -run '^$$' -fuzz FuzzReadInbound -fuzztime $(FUZZTIME)
	$(GO) test ./a2a -run '^$$' -fuzz FuzzParsePeerSpec -fuzztime $(FUZZTIME)
	$(GO) test ./a2a/v1 -run '^$$' -fuzz FuzzSendMessageRequest -fuzztime $(FUZZTIME)
	$(GO) test ./delegate -run '^$$' -fuzz FuzzParseRule -fuzztime $(FUZZTIME)

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

clean:
	rm -rf bin
