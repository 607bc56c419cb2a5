# MiniSandbox build and test. CGO is off: msb is a static binary that
# re-executes itself inside sandboxes, and Go's all-threads syscalls need it.
export CGO_ENABLED = 0
GO ?= go

.PHONY: build demo test test-short bench vet fmt clean

# bin/msb-sandbox is the inside of a sandbox; msb uses it when it sits next
# to msb (a small binary starts faster), else re-executes itself.
build:
	$(GO) build -trimpath -o bin/msb ./cmd/msb
	$(GO) build -trimpath -o bin/msb-sandbox ./cmd/msb-sandbox

# The main job on its embedded default: no network, no dataset download.
demo: build
	./bin/msb demo

# The whole suite: unit tests, root-mode sandbox tests and (as root) the
# rootless suite re-run as an unprivileged user it creates. MSB_TEST_STRICT
# turns "skipped for lack of a host feature" into a failure, and
# MSB_TEST_REQUIRE_ROOT (set when make test runs as root) "skipped for lack
# of root" (internal/privtest).
test: build vet
	MSB_TEST_STRICT=$${MSB_TEST_STRICT:-1} \
	MSB_TEST_REQUIRE_ROOT=$${MSB_TEST_REQUIRE_ROOT:-$$(test "$$(id -u)" = 0 && echo 1 || echo 0)} \
	$(GO) test -count=1 -timeout 30m ./...

test-short: build
	$(GO) test -count=1 -short ./...

# Go micro-benchmarks, then the harness against the baselines (docs/bench.md);
# e.g. BENCH_FLAGS="--repo-source psf/requests=/srv/repos/requests.git".
BENCH_FLAGS ?=
bench: build
	$(GO) test -run XXX -bench . -benchtime 200x ./internal/sandbox/ ./internal/session/
	./bin/msb bench $(BENCH_FLAGS)

vet:
	$(GO) vet ./...
	@test -z "$$(gofmt -l cmd internal)" || { gofmt -l cmd internal; echo "gofmt needed"; exit 1; }

clean:
	rm -rf bin
