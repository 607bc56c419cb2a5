# MiniSandbox build and test. CGO is off: msb is a static binary that
# re-executes itself inside sandboxes, and Go's all-threads syscalls need it.
export CGO_ENABLED = 0
GO ?= go

.PHONY: build demo test test-go test-python test-harbor pyenv pyenv-harbor test-short bench vet fmt clean test-venv test-npm

# bin/msb is the lean msb (-tags msblean): msb run, shell, doctor, gc,
# version and the daemon's client verbs, linking the sandbox layer alone so
# that it starts fast; for the verbs that need the engine (cache, eval,
# validate, serve, spec, integrity, demo, run --image) it runs bin/msb-full,
# the full msb (cmd/msb without the tag), in its place with the same arguments.
# bin/msb-sandbox is the inside of a sandbox; msb uses it when it sits next
# to msb (a small binary starts faster), else re-executes itself.
# bin/msb-bench is the benchmark, which msb does not link: msb bench runs it.
# msb-sandbox is built with Go's previous garbage collector: the green tea
# collector (Go 1.26's default) keeps mark bits in each small-object span's
# last page, and an idle supervisor, which allocated little and never
# collected, had 0.08 MiB more memory for them (docs/bench.md, 2026-12-05).
# Go 1.27 may drop this opt-out; then drop it here and in cmd/msb-sandbox's
# TestBuiltWithoutGreenTea.
SANDBOX_GOEXPERIMENT ?= nogreenteagc
build:
	$(GO) build -trimpath -buildvcs=auto -tags msblean -o bin/msb ./cmd/msb
	$(GO) build -trimpath -buildvcs=auto -o bin/msb-full ./cmd/msb
	GOEXPERIMENT=$(SANDBOX_GOEXPERIMENT) $(GO) build -trimpath -o bin/msb-sandbox ./cmd/msb-sandbox
	$(GO) build -trimpath -o bin/msb-bench ./cmd/msb-bench

# The main job on its embedded default: no network, no dataset download.
demo: build
	./bin/msb demo

# The whole suite: unit tests, root-mode sandbox tests and (as root) the
# rootless suite re-run as an unprivileged user it creates. MSB_TEST_STRICT
# turns "skipped for lack of a host feature" into a failure, and
# MSB_TEST_REQUIRE_ROOT (set when make test runs as root) "skipped for lack
# of root" (internal/privtest).
# The server's Python tests (SWE-ReX's own client, schemathesis) use the
# venv test-venv makes from internal/server/testdata/requirements.txt; the
# spec table's comparison with the SWE-bench harness reads the swebench
# package pinned in internal/spec/testdata/requirements.txt from it too, and
# grading's the one in internal/grading/testdata/harness/requirements.txt
# from .venv-test/swebench-grading; SWE-smith's parser comes from the
# swesmith package of internal/grading/testdata/harness/swesmith-requirements.txt.
TEST_PYTHON ?= $(CURDIR)/.venv-test/bin/python

# make test first installs the Debian packages the suite uses (.ci/deps, when
# run as root). Where they cannot be had (not root, not Debian) the suite runs
# without strict mode: each test that needs a missing package skips and says
# which. Its targets run one after another: under make -j the Go tests
# inherit MAKEFLAGS naming jobserver descriptors they are not given, which
# tools they run (rustc, make) warn about in their output (docs/testing.md).
# The rootless suites' user is removed at the end when make test made it,
# and the root-mode disk pool the tests' runtimes share lives in a directory of
# the run's own (MSB_DISK_DIR), removed at the end with every mount under it
# (the pool's volume, whose loop device detaches itself, and the idmap user
# namespace bound beside it), so that a test run leaves no mount behind.
TEST_USER = msbtest
test:
	@.ci/deps || echo "make test: the tests that need these packages will skip (strict mode off)"
	@had_user=$$(id -u $(TEST_USER) >/dev/null 2>&1 && echo 1); \
	strict=$${MSB_TEST_STRICT:-$$(.ci/deps --check >/dev/null 2>&1 && echo 1 || echo 0)}; \
	disk=$${MSB_DISK_DIR:-$$(mktemp -d /var/tmp/msb-test-disk.XXXXXX)}; \
	MSB_DISK_DIR=$$disk MSB_TEST_STRICT=$$strict $(MAKE) --no-print-directory test-go test-python; rc=$$?; \
	if [ -z "$$MSB_DISK_DIR" ]; then for m in $$(awk -v d="$$disk/" 'index($$5, d) == 1 {print $$5}' /proc/self/mountinfo | sort -r); do umount -l "$$m"; done; rm -rf $$disk; fi; \
	if [ -z "$$had_user" ] && id -u $(TEST_USER) >/dev/null 2>&1; then \
		userdel -r $(TEST_USER) 2>/dev/null || echo "make test: could not remove user $(TEST_USER)"; fi; \
	exit $$rc

STRICT = MSB_TEST_STRICT=$${MSB_TEST_STRICT:-1} \
	MSB_TEST_REQUIRE_ROOT=$${MSB_TEST_REQUIRE_ROOT:-$$(test "$$(id -u)" = 0 && echo 1 || echo 0)}

# go test runs as many test binaries at once as there are cores (2 in CI),
# starting them in the order the packages are named: the slowest are named
# first, so that none of them starts near the end with little left to run
# beside it (docs/testing.md says what this gains).
SLOW_TEST_PKGS = ./internal/task ./internal/sandbox ./internal/envcache ./internal/cli ./internal/engine ./internal/server/e2b
test-go: build vet test-venv test-npm
	MSB_TEST_PYTHON=$${MSB_TEST_PYTHON:-$(TEST_PYTHON)} MSB_TEST_SWEBENCH_GRADING=$${MSB_TEST_SWEBENCH_GRADING:-$(CURDIR)/.venv-test/swebench-grading} \
		MSB_TEST_MULTISWE=$${MSB_TEST_MULTISWE:-$(CURDIR)/.venv-test/multi-swe-bench} \
		MSB_TEST_HARBOR=$${MSB_TEST_HARBOR:-$(CURDIR)/$(HARBOR_VENV)/bin/harbor} \
		$(STRICT) $(GO) test -count=1 -timeout 45m $(SLOW_TEST_PKGS) ./...

# The Python client, its backends and msb.ray, against a daemon built from
# this tree (bin/msb), in a venv with the pinned test requirements.
PYTHON ?= python3
VENV ?= .venv
# Harbor needs Python >= 3.12: its test runs in a venv of its own, on pyenv's
# 3.12 (or python3.12 on PATH). make test makes both venvs at once; their
# editable installs of the client write the same src/msb.egg-info, so each
# holds a lock on clients/python (flock) while it does.
HARBOR_PYTHON ?= $(firstword $(wildcard $(HOME)/.pyenv/versions/3.12*/bin/python3.12) $(shell command -v python3.12))
HARBOR_VENV ?= .venv-harbor
# The E2B front end's Harbor test (internal/server/e2b) runs Harbor's CLI from it.
test-go: $(if $(HARBOR_PYTHON),pyenv-harbor)
test-python: build pyenv
	cd clients/python && $(STRICT) MSB_BIN=$(CURDIR)/bin/msb ../../$(VENV)/bin/python -m pytest -q -p no:cacheprovider tests
	@if [ -n "$(HARBOR_PYTHON)" ]; then $(MAKE) --no-print-directory test-harbor; \
	elif [ "$${MSB_TEST_STRICT:-1}" = 1 ]; then echo "no Python 3.12 for Harbor's test (set HARBOR_PYTHON)"; exit 1; \
	else echo "skipped Harbor's test: no Python 3.12 (pyenv's, or python3.12 on PATH)"; fi

test-harbor: build pyenv-harbor
	cd clients/python && $(STRICT) MSB_BIN=$(CURDIR)/bin/msb ../../$(HARBOR_VENV)/bin/python -m pytest -q -p no:cacheprovider tests/test_harbor.py

pyenv: $(VENV)/.msb-stamp
$(VENV)/.msb-stamp: clients/python/requirements-test.txt clients/python/pyproject.toml
	test -x $(VENV)/bin/pip || $(PYTHON) -m venv --clear $(VENV)
	$(VENV)/bin/pip install -q -r clients/python/requirements-test.txt
	flock clients/python $(VENV)/bin/pip install -q --no-deps -e clients/python
	touch $@

pyenv-harbor: $(HARBOR_VENV)/.msb-stamp
$(HARBOR_VENV)/.msb-stamp: clients/python/requirements-harbor.txt clients/python/pyproject.toml
	@test -n "$(HARBOR_PYTHON)" || { echo "no Python 3.12 for Harbor's test (set HARBOR_PYTHON)"; exit 1; }
	test -x $(HARBOR_VENV)/bin/pip || $(HARBOR_PYTHON) -m venv --clear $(HARBOR_VENV)
	$(HARBOR_VENV)/bin/pip install -q -r clients/python/requirements-harbor.txt
	flock clients/python $(HARBOR_VENV)/bin/pip install -q --no-deps -e clients/python
	touch $@

test-short: build
	$(GO) test -count=1 -short ./...

# Go micro-benchmarks, then the harness against the baselines (docs/bench.md);
# e.g. BENCH_FLAGS="--repo-source psf/requests=/srv/repos/requests.git".
BENCH_FLAGS ?=
bench: build
	$(GO) test -run XXX -bench . -benchtime 200x ./internal/sandbox/ ./internal/session/
	./bin/msb-bench $(BENCH_FLAGS)

# The venv of the server's Python test dependencies (pinned): SWE-ReX's own
# client and schemathesis drive msb serve from the Go tests.
test-venv: .venv-test/.msb-stamp
.venv-test/.msb-stamp: internal/server/testdata/requirements.txt internal/spec/testdata/requirements.txt internal/grading/testdata/harness/requirements.txt \
		internal/grading/testdata/harness/swesmith-requirements.txt internal/grading/multiswe/testdata/requirements.txt
	test -x .venv-test/bin/pip || $(PYTHON) -m venv --clear .venv-test
	.venv-test/bin/pip install -q -r internal/server/testdata/requirements.txt
	.venv-test/bin/pip install -q --no-deps -r internal/spec/testdata/requirements.txt -r internal/grading/testdata/harness/swesmith-requirements.txt
	.venv-test/bin/pip install -q --no-deps --upgrade --target .venv-test/swebench-grading -r internal/grading/testdata/harness/requirements.txt
	.venv-test/bin/pip install -q --no-deps --upgrade --target .venv-test/multi-swe-bench -r internal/grading/multiswe/testdata/requirements.txt
	touch $@

# The e2b npm SDK (pinned in its package-lock.json) that TestE2BNodeSDK drives;
# without npm the test skips (fails when strict) and says so.
NPM_SDK = internal/server/e2b/testdata/js
test-npm: $(NPM_SDK)/node_modules/.msb-stamp
$(NPM_SDK)/node_modules/.msb-stamp: $(NPM_SDK)/package.json $(NPM_SDK)/package-lock.json
	@if command -v npm >/dev/null; then cd $(NPM_SDK) && npm ci --ignore-scripts --no-audit --no-fund && touch node_modules/.msb-stamp; \
	else echo "make test-npm: no npm, TestE2BNodeSDK will skip (needs Node >= 20.18.1 and npm)"; fi

# The Vitest (pinned in its package-lock.json) that TestVitestCanary runs the
# JavaScript canary under; without npm the test skips (fails when strict).
NPM_VITEST = internal/grading/integrity/testdata/vitest
test-npm: $(NPM_VITEST)/node_modules/.msb-stamp
$(NPM_VITEST)/node_modules/.msb-stamp: $(NPM_VITEST)/package.json $(NPM_VITEST)/package-lock.json
	@if command -v npm >/dev/null; then cd $(NPM_VITEST) && npm ci --ignore-scripts --no-audit --no-fund && touch node_modules/.msb-stamp; \
	else echo "make test-npm: no npm, TestVitestCanary will skip"; fi

# deadcode (pinned) lists functions that nothing reaches, tests included.
DEADCODE = golang.org/x/tools/cmd/deadcode@v0.39.0
vet:
	$(GO) vet ./...
	$(GO) vet -tags msblean ./cmd/msb ./internal/cli
	@test -z "$$(gofmt -l cmd internal)" || { gofmt -l cmd internal; echo "gofmt needed"; exit 1; }
	@dead=$$($(GO) run $(DEADCODE) -test ./...) && test -z "$$dead" || { echo "$$dead"; echo "dead code (nothing calls it, not even a test): remove it"; exit 1; }

clean:
	rm -rf bin $(VENV) $(HARBOR_VENV) .venv-test $(NPM_SDK)/node_modules $(NPM_VITEST)/node_modules
