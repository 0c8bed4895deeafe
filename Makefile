# agentd: `make run` starts the service on loopback with the builtin
# intelligence; `make test` runs every test. Nothing here needs a manual step.
GO       ?= go
BIN      := bin/agentd
LISTEN   ?= 127.0.0.1:8080
FUZZTIME ?= 20s
JS_DEPS  := cmd/agentd/e2e/js/node_modules/.installed
MCP_DEPS := cmd/agentd/e2e/mcp/node_modules/.installed

# GO_TAGS are the build tags of every agentd binary the Makefile, the image
# (deploy/Dockerfile) and the e2e tests build: grpcnotrace leaves grpc's
# golang.org/x/net/trace (and html/template) out, which agentd never uses
# (grpc carries the SPIFFE Workload API and the A2A gRPC binding): 3.9 MB of
# the stripped binary (docs/dependencies.md).
GO_TAGS  := grpcnotrace

# GOEXPERIMENT is the runtime every Go binary here is built with, agentd's
# and its tests': nogreenteagc, Go 1.26's previous garbage collector. Its
# default, Green Tea, keeps each small-object span's mark bits in the span's
# own last bytes, so a span the program has barely used holds two pages
# where one did: an agentd child, whose heap is a few hundred KiB in spans
# of many size classes, is 100 KiB larger idle with it (1984 against 1886
# KiB private; docs/performance.md, figure 9), and the collector's speed-up
# is for large heaps on many cores. The image (deploy/Dockerfile) and the
# e2e tests' build set it too. Go 1.27 is to drop the setting.
GOEXPERIMENT ?= nogreenteagc
export GOEXPERIMENT

.PHONY: all build image run test test-deps pg-deps e2e-mcp-deps chromium lint vet fmt-check staticcheck unit deploy-test fuzz bench bench-go clean tck tck-1.0 tck-1.0-dev test-spire spire proto podman-deps

all: build

build:
	$(GO) build -tags $(GO_TAGS) -o $(BIN) ./cmd/agentd

run: build
	./$(BIN) serve --listen $(LISTEN)

# image: the container image IMAGE, built by podman (daemonless; installed
# from Debian when missing, as root, with runc, which it runs containers
# with here) without a registry: deploy/Containerfile.local puts a static
# binary (CGO_ENABLED=0, stripped, GO_TAGS, as deploy/Dockerfile's stage 1
# builds it), the host's CA bundle and a passwd naming uid 65532 on an empty
# base, from the context IMAGE_CTX. deploy/Dockerfile's two stages build the
# same image where golang and distroless are reachable. podman reads
# CONTAINERS_CONF when it is set (the image test's runtime and ulimits).
VERSION   ?= 0.1.0
IMAGE     ?= localhost/agentd:$(VERSION)
IMAGE_CTX ?= bin/image
CA_BUNDLE ?= /etc/ssl/certs/ca-certificates.crt
image: podman-deps
	@command -v podman >/dev/null || { echo "podman is missing: as root, run apt-get update && apt-get install -y podman runc"; exit 1; }
	@test -s $(CA_BUNDLE) || { echo "$(CA_BUNDLE) is missing: the image carries the host's CA bundle (apt-get install ca-certificates)"; exit 1; }
	rm -rf $(IMAGE_CTX) && mkdir -p $(IMAGE_CTX)
	CGO_ENABLED=0 $(GO) build -tags $(GO_TAGS) -trimpath -ldflags="-s -w -X main.version=$(VERSION)" -o $(IMAGE_CTX)/agentd ./cmd/agentd
	cp $(CA_BUNDLE) $(IMAGE_CTX)/ca-certificates.crt
	printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' > $(IMAGE_CTX)/passwd
	printf 'root:x:0:\nnonroot:x:65532:\n' > $(IMAGE_CTX)/group
	podman build --pull=never -f deploy/Containerfile.local -t $(IMAGE) $(IMAGE_CTX)

# test: formatting, vet, staticcheck, then every package with the race detector (after
# installing the npm packages the e2e tests drive agentd with), then the
# offline validation of deploy/.
test: lint unit deploy-test

lint: fmt-check vet staticcheck

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

# vet also checks the real-SPIRE test, which only `make test-spire` compiles.
vet:
	$(GO) vet ./...
	$(GO) vet -tags spire ./cmd/agentd/e2e

# staticcheck at the version pinned by the `tool` directive in go.mod
# (honnef.co/go/tools v0.8.2, go.sum checks it), run with `go tool`: no
# install step, and the version moves only by editing go.mod
# (`go get -tool honnef.co/go/tools/cmd/staticcheck@VERSION`). The directive
# adds staticcheck's own modules to go.mod as indirect requirements, but no
# package of agentd, nor of its tests, builds with a different module version
# for it (`go list -deps -test ./...` is the same with and without), so the
# build list stays clean; `go run ...@version` would keep go.mod untouched but
# name the version here instead of where the other dependencies are pinned.
# It also checks the real-SPIRE test (-tags spire), like vet.
staticcheck:
	$(GO) tool staticcheck ./...
	$(GO) tool staticcheck -tags spire ./cmd/agentd/e2e

# AGENTD_REQUIRE_CHROMIUM=1: the console's browser test fails, rather than
# skips, when chromium is missing (test-deps installs it).
unit: test-deps
	AGENTD_REQUIRE_CHROMIUM=1 $(GO) test -race -count=1 -timeout 12m ./...

# deploy-test: deploy/ is a module of its own (the Kubernetes libraries stay
# out of the main module): it renders the kustomizations, decodes every object
# strictly, runs the PodSecurity "restricted" checks and checks the Dockerfile.
deploy-test:
	cd deploy && $(GO) vet ./... && $(GO) test -count=1 -timeout 10m ./...

# test-deps: Debian's chromium (below), and the npm packages the e2e tests
# need, each installed with `npm ci`
# from its committed lock file, again only when the lock changes (the stamp
# .installed is touched only after npm ci succeeded; npm's own
# node_modules/.package-lock.json may be left by a failed install): the
# JavaScript A2A SDKs (0.3 and 1.0) that cmd/agentd/e2e/js_test.go drives agentd with,
# into cmd/agentd/e2e/js/node_modules, and the reference MCP server
# (@modelcontextprotocol/server-everything) of cmd/agentd/e2e/mcp_test.go, into
# cmd/agentd/e2e/mcp/node_modules.
test-deps: $(JS_DEPS) $(MCP_DEPS) pg-deps chromium podman-deps

# podman-deps: Debian's podman and runc, which `make image` and the image
# test (cmd/agentd/e2e TestImage) build and run the image with; installed
# when podman is missing, as root (apt-get update only when the package
# lists do not know podman yet). Not root: said, not failed (the image test
# skips, saying why).
podman-deps:
	@if command -v podman >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ]; then \
		{ apt-cache policy podman 2>/dev/null | grep -q 'Candidate: [0-9]' || { $(APT_UPDATE); }; } && $(APT_INSTALL) podman runc; \
	else \
		echo "podman is missing (the image test will skip): as root, apt-get install podman runc"; \
	fi
e2e-mcp-deps: $(MCP_DEPS)

# The Debian packages below are installed as root with APT_GET, which waits
# while another apt holds a lock (a new VM's apt-daily and unattended-upgrades)
# instead of failing, at most APT_LOCK_WAIT seconds for each lock: apt-get
# waits for dpkg's lock itself (DPkg::Lock::Timeout), and APT_UPDATE retries
# `apt-get update` every APT_LOCK_POLL seconds while the package lists' lock,
# which apt-get never waits for, is held (any other failure fails at once).
# Nothing but the package named and what it depends on is installed
# (--no-install-recommends), and nothing else is upgraded: no `apt-get
# upgrade`, --no-upgrade for a package already there, and apt-get install
# upgrades an installed dependency only when the new package requires it.
APT_LOCK_WAIT ?= 600
APT_LOCK_POLL ?= 5
APT_GET       := LC_ALL=C DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=$(APT_LOCK_WAIT)
APT_INSTALL   := $(APT_GET) install -y --no-install-recommends --no-upgrade
APT_UPDATE     = waited=0; \
	until out=$$($(APT_GET) update 2>&1); do \
		case "$$out" in *"Could not get lock"*) ;; *) printf '%s\n' "$$out" >&2; exit 1;; esac; \
		if [ "$$waited" -ge $(APT_LOCK_WAIT) ]; then printf '%s\n' "$$out" >&2; exit 1; fi; \
		echo "apt-get update: another apt holds the package lists' lock; waiting"; \
		sleep $(APT_LOCK_POLL); waited=$$((waited + $(APT_LOCK_POLL))); \
	done; printf '%s\n' "$$out"

# pg-deps: PostgreSQL's server binaries (initdb, postgres), which the tests of
# store/postgres and the replica e2e tests start on their own (internal/pgtest:
# a temporary cluster on a free loopback port, as the nobody user under root).
# Debian's postgresql package is installed when initdb is neither on PATH nor
# in /usr/lib/postgresql/*/bin (apt-get needs root).
pg-deps:
	@if command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ]; then \
		{ $(APT_UPDATE); } && $(APT_INSTALL) postgresql; \
	else \
		echo "PostgreSQL (initdb, postgres) is required by the store tests: apt-get install postgresql, as root"; exit 1; \
	fi

# chromium: Debian's chromium, which cmd/agentd/e2e/console_test.go drives headless
# (chromedp) against the console. Installed when missing, as root: apt-get
# update (only when the package lists do not know chromium yet, so once),
# then apt-get install chromium (APT_INSTALL: without its recommends, which
# headless chromium under chromedp, --no-sandbox, does not use).
chromium:
	@command -v chromium >/dev/null || { \
		if [ "$$(id -u)" != 0 ]; then echo "chromium is missing: as root, run apt-get update && apt-get install -y chromium"; exit 1; fi; \
		apt-cache policy chromium 2>/dev/null | grep -q 'Candidate: [0-9]' || { $(APT_UPDATE); }; \
		$(APT_INSTALL) chromium; }

$(JS_DEPS): cmd/agentd/e2e/js/package.json cmd/agentd/e2e/js/package-lock.json
	@command -v npm >/dev/null || { echo "npm (Node.js 20+) is required for the e2e tests"; exit 1; }
	cd cmd/agentd/e2e/js && npm ci --no-audit --no-fund
	touch $@

$(MCP_DEPS): cmd/agentd/e2e/mcp/package.json cmd/agentd/e2e/mcp/package-lock.json
	@command -v npm >/dev/null || { echo "npm (Node.js 20+) is required for the e2e tests"; exit 1; }
	cd cmd/agentd/e2e/mcp && npm ci --no-audit --no-fund
	touch $@

# tck: the public A2A TCK (spec 0.3) against `agentd serve` on loopback, with a
# slow builtin model (tasks outlive a bounded blocking send, as the TCK's
# cancel and follow-up tests need) and webhooks allowed on loopback (the TCK's
# receiver). Needs a checkout of a2aproject/a2a-tck at b03fefc in TCK_DIR.
TCK_SCRIPT ?= ../shared/tools/a2a-tck.sh
tck: build
	$(TCK_CONFIG) $(TCK_SCRIPT) --agentd $(CURDIR)/$(BIN)

# TCK_CONFIG is the agentd config both TCKs run against (docs/conformance.md).
# Each run on a state directory of its own (the default store is sqlite).
TCK_CONFIG := AGENT_STATE_DIR=$$(mktemp -d) AGENT_INTELLIGENCE=builtin:demo=2s AGENT_SEND_WAIT=500ms AGENT_PUSH_ALLOW_NET=127.0.0.0/8,::1/128

# tck-1.0: the public A2A TCK at its 1.0 release candidate (a2aproject/a2a-tck
# at 410ba92, JSON-RPC transport), categories mandatory and capabilities, in
# the config of `make tck`: once as the TCK runs by default (no A2A-Version
# header), once with A2A-Version: 1.0 on every request. Needs a checkout at
# 410ba92 in TCK10_DIR; the runner fetches its Debian python packages itself.
# Each run's logs are in TCK10_OUT/noheader and TCK10_OUT/header.
TCK10_SCRIPT ?= ../shared/tools/a2a-tck-1.0.sh
TCK10_DIR ?= $(HOME)/.cache/a2a-tck-1.0
TCK10_OUT ?= $(CURDIR)/bin/tck-1.0
tck-1.0: build
	@mkdir -p $(TCK10_OUT)/noheader $(TCK10_OUT)/header
	@echo "TCK 1.0, no A2A-Version header:"
	$(TCK_CONFIG) TCK10_DIR=$(TCK10_DIR) TMPDIR=$(TCK10_OUT)/noheader \
		$(TCK10_SCRIPT) --agentd $(CURDIR)/$(BIN) mandatory capabilities
	@echo "TCK 1.0, A2A-Version: 1.0:"
	$(TCK_CONFIG) TCK10_DIR=$(TCK10_DIR) TMPDIR=$(TCK10_OUT)/header A2A_AUTH_HEADERS='{"A2A-Version":"1.0"}' \
		$(TCK10_SCRIPT) --agentd $(CURDIR)/$(BIN) mandatory capabilities

# tck-1.0-dev: the newer A2A TCK (a2aproject/a2a-tck branch 1.0-dev at 357c4a8,
# spec 1.0.0) over TCKDEV_TRANSPORT: jsonrpc (the default), http_json, grpc, a
# comma list, or all (every transport the card declares; one run each). agentd
# runs in its default config (a blocking send answers when the task ends, which
# this TCK's artifact and data-model checks read) with webhooks allowed on
# loopback (the TCK's receiver); the runner gives it a state directory of its
# own. Needs a checkout at 357c4a8 in TCKDEV_DIR (made from a clone as the
# runner's header says); the runner fetches its Debian python packages itself.
# Each run's logs are in TCKDEV_OUT. Not part of `make test`.
TCKDEV_SCRIPT ?= ../shared/tools/a2a-tck-1.0-dev.sh
TCKDEV_DIR ?= $(HOME)/.cache/a2a-tck-1.0-dev
TCKDEV_OUT ?= $(CURDIR)/bin/tck-1.0-dev
TCKDEV_TRANSPORT ?= jsonrpc
tck-1.0-dev: build
	@mkdir -p $(TCKDEV_OUT)
	AGENT_PUSH_ALLOW_NET=127.0.0.0/8,::1/128 TCKDEV_DIR=$(TCKDEV_DIR) TMPDIR=$(TCKDEV_OUT) \
		$(TCKDEV_SCRIPT) --agentd $(CURDIR)/$(BIN) --transport $(TCKDEV_TRANSPORT)

# fuzz: run each fuzz target for FUZZTIME (the seed corpora under testdata/
# run on every `make test`).
fuzz:
	$(GO) test ./api -run '^$$' -fuzz FuzzReadFrame -fuzztime $(FUZZTIME)
	$(GO) test ./server -run '^$$' -fuzz FuzzJSONRPC -fuzztime $(FUZZTIME)
	$(GO) test ./internal/agent/intelligence -run '^$$' -fuzz FuzzParseScript -fuzztime $(FUZZTIME)
	$(GO) test ./cmd/agentd -run '^$$' -fuzz FuzzParseSize -fuzztime $(FUZZTIME)
	$(GO) test ./api -run '^$$' -fuzz FuzzParseBlobURI -fuzztime $(FUZZTIME)
	$(GO) test ./api -run '^$$' -fuzz FuzzParseEndpointSpec -fuzztime $(FUZZTIME)
	$(GO) test ./internal/agent/intelligence -run '^$$' -fuzz FuzzParseRetryAfter -fuzztime $(FUZZTIME)
	$(GO) test ./internal/agent -run '^$$' -fuzz FuzzJSONAnswer -fuzztime $(FUZZTIME)
	$(GO) test ./internal/agent/intelligence -run '^$$' -fuzz FuzzChatResponse -fuzztime $(FUZZTIME)
	$(GO) test ./a2a/a2abind -run '^$$' -fuzz FuzzReadInbound -fuzztime $(FUZZTIME)
	$(GO) test ./a2a/peer -run '^$$' -fuzz FuzzParseSpec -fuzztime $(FUZZTIME)
	$(GO) test ./a2a/a2av1 -run '^$$' -fuzz FuzzSendMessageRequest -fuzztime $(FUZZTIME)
	$(GO) test ./a2a/a2av1 -run '^$$' -fuzz FuzzDecodeRequest -fuzztime $(FUZZTIME)
	$(GO) test ./supervisor/delegate -run '^$$' -fuzz FuzzParseRule -fuzztime $(FUZZTIME)
	$(GO) test ./server -run '^$$' -fuzz FuzzParseTokens -fuzztime $(FUZZTIME)
	$(GO) test ./server -run '^$$' -fuzz FuzzStrictJSON -fuzztime $(FUZZTIME)
	$(GO) test ./tlsconfig -run '^$$' -fuzz FuzzParsePolicy -fuzztime $(FUZZTIME)
	$(GO) test ./internal/telemetry -run '^$$' -fuzz FuzzTraceparent -fuzztime $(FUZZTIME)
	$(GO) test ./internal/telemetry -run '^$$' -fuzz FuzzExportFromEnv -fuzztime $(FUZZTIME)
	$(GO) test ./supervisor/mcp -run '^$$' -fuzz FuzzParseServer -fuzztime $(FUZZTIME)
	$(GO) test ./supervisor/mcp -run '^$$' -fuzz FuzzParseTags -fuzztime $(FUZZTIME)
	$(GO) test ./supervisor/mcp -run '^$$' -fuzz FuzzParseToolList -fuzztime $(FUZZTIME)
	$(GO) test ./supervisor/workflow -run '^$$' -fuzz FuzzParse -fuzztime $(FUZZTIME)
	$(GO) test ./a2a/a2acall -run '^$$' -fuzz FuzzDecode -fuzztime $(FUZZTIME)
	$(GO) test ./a2a/a2acall -run '^$$' -fuzz FuzzEvents -fuzztime $(FUZZTIME)

# test-spire: a real SPIRE server and agent on 127.0.0.1 issue the SVIDs of two
# agentd services that call each other over mTLS. spire-server and spire-agent
# are built once from the Go module proxy (cmd/agentd/spire, its own module) into
# $$HOME/.cache/agentd-spire (about 25 minutes the first time on 2 cores).
spire:
	@bash cmd/agentd/spire/build.sh >/dev/null

test-spire: spire
	AGENTD_SPIRE_BIN="$$(bash cmd/agentd/spire/build.sh)" $(GO) test -race -count=1 -tags spire -run '^TestSPIRE$$' -v -timeout 10m ./cmd/agentd/e2e

# proto: regenerates the A2A 1.0 gRPC binding's Go code (a2a/a2agrpc/a2apb)
# from its .proto, with Debian's protoc (protobuf-compiler, and
# libprotobuf-dev for the well-known types; installed when missing, as root)
# and the Go plugins at pinned versions: protoc-gen-go at go.mod's
# google.golang.org/protobuf, protoc-gen-go-grpc at PROTOC_GEN_GO_GRPC.
PROTOC_GEN_GO_GRPC := v1.6.2
PROTO_BIN          := $(abspath bin/proto)
proto:
	@command -v protoc >/dev/null && [ -f /usr/include/google/protobuf/struct.proto ] || \
	  apt-get install -y --no-install-recommends protobuf-compiler libprotobuf-dev
	GOBIN=$(PROTO_BIN) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go
	GOBIN=$(PROTO_BIN) $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC)
	PATH=$(PROTO_BIN):$$PATH protoc -I. -I/usr/include \
	  --go_out=. --go_opt=module=github.com/agentd/agentd \
	  --go-grpc_out=. --go-grpc_opt=module=github.com/agentd/agentd \
	  a2a/a2agrpc/a2apb/a2a.proto
	sed -i -f a2a/a2agrpc/a2apb/lazy.sed a2a/a2agrpc/a2apb/a2a.pb.go

# bench: the table the README quotes (cmd/bench/, package doc). The binaries are
# built as deployed (static, stripped); BENCH_FLAGS passes flags to the harness
# (agentd-bench -h lists them, e.g. BENCH_FLAGS="-rounds 3 -figures spawn").
BENCH_DIR   := bin/bench
BENCH_FLAGS ?=
bench:
	@mkdir -p $(BENCH_DIR)
	CGO_ENABLED=0 $(GO) build -tags $(GO_TAGS) -trimpath -ldflags="-s -w" -o $(BENCH_DIR)/agentd ./cmd/agentd
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags="-s -w" -o $(BENCH_DIR)/floor ./cmd/bench/floor
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags="-s -w" -o $(BENCH_DIR)/treechild ./cmd/bench/treechild
	$(GO) build -o $(BENCH_DIR)/agentd-bench ./cmd/agentd-bench
	./$(BENCH_DIR)/agentd-bench -agentd $(BENCH_DIR)/agentd -floor $(BENCH_DIR)/floor -treechild $(BENCH_DIR)/treechild $(BENCH_FLAGS)

# bench-go: the Go benchmarks beside the code (frame codec, task store...).
bench-go:
	$(GO) test -run '^$$' -bench . -benchmem ./...

clean:
	rm -rf bin
