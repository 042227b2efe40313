# Maestro — see README.md. The two set-up commands for a fresh machine are
# `make demo` (the main job on embedded defaults, no keys) and `make test`
# (the whole test suite, as CI runs it).

GO ?= go
BIN ?= bin/maestro
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X github.com/maestro-run/maestro/internal/cli.version=$(VERSION)
# No cgo (README, "Set up on a fresh machine"): maestro is static, and
# every build, vet and test links with Go's own linker, not through gcc.
CGO_ENABLED ?= 0
export CGO_ENABLED

.PHONY: build demo test vet fmt bench clean web web-dev web-check test-web

# maestro, and the scripted fake model server beside it (docs/fakemodel.md).
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/maestro
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w' -o $(dir $(BIN))maestro-fakemodel ./cmd/maestro-fakemodel

# The main job on embedded defaults: the bundled replay scenario (--model
# replay/demo, even when a MAESTRO_HOME you keep names a model) runs with real
# tools in a fresh temporary workspace; Maestro's
# home (session logs) sits beside it, never inside (a workspace holding the
# home is refused: the agent could read the model keys).
demo: build
	@tmp=$$(mktemp -d -t maestro-demo.XXXXXX); ws=$$tmp/workspace; mkdir -p "$$ws"; \
	echo "workspace: $$ws"; \
	env -u ANTHROPIC_API_KEY -u ANTHROPIC_AUTH_TOKEN -u OPENAI_API_KEY -u OPENAI_BASE_URL -u MAESTRO_MODEL \
		MAESTRO_HOME=$${MAESTRO_HOME:-$$tmp/maestro-home} \
		./$(BIN) run --model replay/demo --workspace "$$ws" "Show me what you can do in this workspace"; rc=$$?; \
	echo "The commands above name maestro, which is $(CURDIR)/$(BIN): export PATH=\"$(CURDIR)/$(patsubst %/,%,$(dir $(BIN))):\$$PATH\" to run them as printed."; \
	exit $$rc

# The whole test suite (installs what the tests need first).
test:
	bash scripts/test.sh

# The web UI (docs/web-ui.md): web/ built into internal/webui/dist/, which
# is committed so that `go build` alone embeds it; build again after
# changing web/.
web:
	cd web && npm ci && npm run build

# Vite's dev server (hot reload) in front of a running `maestro serve`
# (MAESTRO_URL, default http://127.0.0.1:7878): it serves web/ and proxies
# /api, /healthz, /readyz and /metrics to the server.
web-dev:
	cd web && { [ -d node_modules ] || npm ci; } && npm run dev

# CI's check that the committed build is the build of web/.
web-check: web
	git diff --exit-code --stat -- internal/webui/dist
	@untracked=$$(git ls-files --others --exclude-standard -- internal/webui/dist); \
	if [ -n "$$untracked" ]; then echo "web-check: the build made files that are not committed:"; echo "$$untracked"; exit 1; fi

# The web UI's tests: component tests, the rebuild check and the browser
# end-to-end tests in Chromium (scripts/test-web.sh; make test runs it).
test-web:
	bash scripts/test-web.sh

vet:
	$(GO) vet ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

bench:
	bash bench/run.sh

clean:
	rm -rf bin
