# MiniSandbox build and test. CGO is off: msb is a static binary that
# re-executes itself inside sandboxes, and Go's all-threads syscalls need it.
export CGO_ENABLED = 0
GO ?= go

.PHONY: build demo test test-go test-python pyenv test-short bench vet fmt clean

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
test: test-go test-python

STRICT = MSB_TEST_STRICT=$${MSB_TEST_STRICT:-1} \
	MSB_TEST_REQUIRE_ROOT=$${MSB_TEST_REQUIRE_ROOT:-$$(test "$$(id -u)" = 0 && echo 1 || echo 0)}

test-go: build vet
	$(STRICT) $(GO) test -count=1 -timeout 30m ./...

# The Python client, its backends and msb.ray, against a daemon built from
# this tree (bin/msb), in a venv with the pinned test requirements.
PYTHON ?= python3
VENV ?= .venv
test-python: build pyenv
	cd clients/python && $(STRICT) MSB_BIN=$(CURDIR)/bin/msb ../../$(VENV)/bin/python -m pytest -q -p no:cacheprovider tests

pyenv: $(VENV)/.msb-stamp
$(VENV)/.msb-stamp: clients/python/requirements-test.txt clients/python/pyproject.toml
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q -r clients/python/requirements-test.txt
	$(VENV)/bin/pip install -q --no-deps -e clients/python
	touch $@

test-short: build
	$(GO) test -count=1 -short ./...

bench: build
	$(GO) test -run XXX -bench . -benchtime 200x ./internal/sandbox/ ./internal/session/
	./bin/msb bench sandbox

vet:
	$(GO) vet ./...
	@test -z "$$(gofmt -l cmd internal)" || { gofmt -l cmd internal; echo "gofmt needed"; exit 1; }

clean:
	rm -rf bin $(VENV)
