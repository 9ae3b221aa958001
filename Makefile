# ZeroBridge: `make demo` and `make test` work from a fresh clone on a fresh Debian machine.
SHELL := /bin/bash
.DEFAULT_GOAL := test

VENV      := .venv
PY        := $(VENV)/bin/python
# SwiftPM leaves a few empty TemporaryDirectory.* folders and its lock files in TMPDIR at every run: it is given its own
# under .build, so builds leave nothing in /tmp. (`swift test` runs the tests under a scratch TMPDIR instead, below:
# its tests inherit it, and an ipc path under a deep checkout could pass the 107 bytes a socket path may have.)
SWIFTPM_TMP := $(CURDIR)/.build/swiftpm-tmp
SWIFT     := mkdir -p '$(SWIFTPM_TMP)' && TMPDIR='$(SWIFTPM_TMP)' swift
SUDO      := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
SWIFT_BIN := .build/debug
export ZEROBRIDGE_BIN := $(CURDIR)/$(SWIFT_BIN)/zerobridge

.PHONY: deps deps-system deps-python build test test-swift test-protocol test-python test-websocket test-node test-browser test-examples test-install test-docs docs demo bench soak fuzz fuzz-corpus bench-security clean

# --- installing what is missing -------------------------------------------------------------
deps: deps-system deps-python

deps-system:
	@missing=""; \
	pkg-config --exists libzmq 2>/dev/null || missing="$$missing libzmq3-dev"; \
	pkg-config --exists sqlite3 2>/dev/null || missing="$$missing libsqlite3-dev"; \
	command -v pkg-config >/dev/null || missing="$$missing pkg-config"; \
	command -v node >/dev/null || missing="$$missing nodejs"; \
	command -v python3 >/dev/null || missing="$$missing python3 python3-venv"; \
	command -v ip >/dev/null || missing="$$missing iproute2"; \
	command -v tcpdump >/dev/null || missing="$$missing tcpdump"; \
	command -v tmux >/dev/null || missing="$$missing tmux"; \
	[ -f /usr/share/nodejs/tweetnacl/package.json ] || missing="$$missing node-tweetnacl"; \
	command -v tsc >/dev/null || missing="$$missing node-typescript"; \
	command -v chromium >/dev/null || missing="$$missing chromium"; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi

# setuptools 77 reads pyproject's SPDX license; test-install builds the wheel with this environment's, offline.
deps-python: $(VENV)/.installed

# rfc8785 is the reference of the differential tests, atheris the Python fuzzer (fuzz/), websockets the client of the
# host's WebSocket tests (tests/websocket), playwright drives Debian's chromium in the browser tests, the import page's
# tests and make demo (it downloads no browser of its own: peers/browser-tests/conftest.py), prometheus-client the
# parser of the metrics text the scrape test reads; opentelemetry-api is the peer's optional tracing (zerobridge[otel])
# and the reference of its trace-context parser, opentelemetry-sdk the in-memory exporter of the cross-language trace test;
# pytest-xdist runs the longest suites' tests side by side (PYTEST_PARALLEL).
$(VENV)/.installed: peers/python/pyproject.toml Makefile
	@[ -x $(PY) ] || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q pyzmq pytest pytest-timeout jsonschema tqdm mypy rfc8785 atheris pdoc websockets playwright prometheus-client opentelemetry-api opentelemetry-sdk pytest-xdist
	$(PY) -m pip install -q -e peers/python
	$(PY) -m pip install -q 'setuptools>=77'
	@touch $@

# --- building -------------------------------------------------------------------------------
build: deps-system
	$(SWIFT) build --build-tests

# --- tests: every suite the repo has; any failure fails the target -------------------------
test: deps build
	@$(MAKE) --no-print-directory test-swift test-protocol test-python test-websocket test-node test-browser test-examples test-install test-docs

# Every suite has a time limit (3 minutes a test); this bounds the whole run too, so a hang fails instead of waiting.
# Two tests that start processes at a time (Tests/TestSupport/ProcessGate.swift; one by default): 43-52 s instead of
# 82 on 2 cores, and it passed beside stress-ng's 2 and 4 CPU workers.
test-swift:
	$(SCRATCH_TMP) ZEROBRIDGE_TEST_PROCESS_WIDTH=2 timeout 1500 swift test --skip-build

# A test that hangs past 300 s fails the run with every thread's stack, instead of hanging CI.
PYTEST := $(PY) -m pytest -q --timeout 300 --timeout-method thread
# The Python peer's and the examples' tests spend most of their time waiting on the hosts and peers they start (the
# suites alone: 20% of one CPU): four at a time, in four processes, they took 66-93 s instead of 189 s, and 51 s
# instead of 98 (2 cores). Every test makes its own hosts, files and sockets, so none depends on another's order.
# (Their targets install pytest-xdist first when a .venv made before it lacks it.)
PYTEST_PARALLEL := -n 4

test-protocol:
	$(PYTEST) protocol/tests

test-python: deps-python
	$(PYTEST) $(PYTEST_PARALLEL) peers/python/tests

# The host's WebSocket listener and page (SPEC 2.2, 3.2) from a real WebSocket client, against the built binary.
test-websocket:
	$(PYTEST) tests/websocket

# Node's tests (and the hosts and peers they start) make their files and ipc sockets under a scratch TMPDIR that is
# removed when the run ends, pass or fail, so runs leave nothing behind in /tmp. Four test files at a time (Node's own
# default is one fewer than the CPUs: one here): 48-51 s instead of 134, for the same reason as PYTEST_PARALLEL.
SCRATCH_TMP = scratch=$$(mktemp -d "$${TMPDIR:-/tmp}/zb-test.XXXXXX") && trap 'rm -rf "$$scratch"' EXIT && TMPDIR=$$scratch

test-node:
	$(SCRATCH_TMP) node --test --test-concurrency=4 peers/node/test/

# The browser peer and the WebKit layer in headless Chromium (Playwright) against the real host over WebSockets.
test-browser:
	$(PYTEST) peers/browser-tests

# The import service end to end: the built import host, the Node ETL peer and both front-ends, as processes;
# and the clients `zerobridge types` generates, type-checked (mypy --strict) and run against a live host.
test-examples: deps-python
	$(PYTEST) $(PYTEST_PARALLEL) examples/tests
	$(SCRATCH_TMP) node --test examples/etl-peer/test/ examples/tests-node/

# The install story as a user follows it (README, Install), outside the repository: the wheel and the npm tarball
# installed into scratch Python and Node projects, and a Swift package depending on this checkout by path, each
# running its tests against the built host (examples/adopt/run.sh); and every place that repeats VERSION agrees.
.PHONY: test-install install
test-install:
	$(PYTEST) examples/adopt/test_versions.py
	PYTHON=$(CURDIR)/$(PY) timeout 1500 bash examples/adopt/run.sh

# --- documentation: DocC for the Swift modules (swift-docc-plugin), pdoc for the Python peer ---------------------
# Each Swift module's site is built with warnings as errors (a broken symbol link, a tutorial directive, an article
# that does not resolve) and must document every public symbol (scripts/docc_coverage.py reads docc's coverage).
# The Python docs' check (pdoc's warnings, a docstring for every public name) is peers/python/tests/test_api_docs.py.
DOCC_TARGETS := ZeroBridge ZeroBridgeJobs ZeroBridgeSupervision
DOCS := .build/docs
DOCC := $(SWIFT) package --allow-writing-to-directory $(DOCS) generate-documentation --warnings-as-errors \
  --enable-inherited-docs --experimental-skip-synthesized-symbols --experimental-documentation-coverage \
  --transform-for-static-hosting

define docc-build
	@mkdir -p $(DOCS)
	@for target in $(DOCC_TARGETS); do \
	  echo "DocC: $$target"; \
	  $(DOCC) --target $$target --output-path $(DOCS)/$$target >$(DOCS)/$$target.log 2>&1 \
	    || { grep -vE '^\[[0-9]+/[0-9]+\]|prohibited flag' $(DOCS)/$$target.log; exit 1; }; \
	done
	python3 scripts/docc_coverage.py $(addprefix $(DOCS)/,$(DOCC_TARGETS))
endef

test-docs: deps-system
	$(docc-build)

# The sites in .build/docs/<module> (static: serve the folder, open /documentation/<module> or /tutorials/zerobridge),
# the Python API in .build/docs/python/index.html.
docs: deps
	$(docc-build)
	$(PY) scripts/python_docs.py $(DOCS)/python

# --- installing the CLI: a release build of zerobridge copied to $(PREFIX)/bin ---------------
PREFIX ?= /usr/local
install: deps-system
	$(SWIFT) build -c release --product zerobridge
	install -d "$(DESTDIR)$(PREFIX)/bin"
	install -m 0755 "$$($(SWIFT) build -c release --show-bin-path)/zerobridge" "$(DESTDIR)$(PREFIX)/bin/zerobridge"
	@echo "installed $(DESTDIR)$(PREFIX)/bin/zerobridge"

# --- the main job ---------------------------------------------------------------------------
# Builds only what the demo runs, so a fresh clone gets there sooner than with the whole test build.
demo: deps
	@$(PY) -c 'import tqdm' 2>/dev/null || $(PY) -m pip install -q tqdm
	$(SWIFT) build --product import-host
	$(SWIFT) build --product zerobridge
	$(PY) examples/demo.py

# --- benchmarks (not part of test): bench/run.py (and bench/import_service.py: the job journal's cost); the wall time printed includes deps and the release build ---
# bench/otel and bench/anchors (grpc-swift-2, Hummingbird 2: the anchors ZeroBridge is compared with, and grpcio, their
# Python client) are packages of their own that only make bench builds and installs.
bench:
	@started=$$(date +%s.%N); \
	$(MAKE) --no-print-directory deps && \
	{ $(PY) -c 'import opentelemetry.proto' 2>/dev/null || $(PY) -m pip install -q opentelemetry-proto; } && \
	{ $(PY) -c 'import grpc' 2>/dev/null || $(PY) -m pip install -q grpcio; } && \
	$(SWIFT) build -c release --product zerobridge-bench && \
	$(SWIFT) build -c release --product zerobridge && \
	$(SWIFT) build -c release --product import-host && \
	ln -sfn ../.. bench/otel/.zerobridge && $(SWIFT) build -c release --package-path bench/otel && \
	$(SWIFT) build -c release --package-path bench/anchors && \
	$(PY) bench/run.py --started $$started

# Hostile and unlucky clients against a release conformance host (bench/soak.py, about 5 minutes after the build):
# its peak memory, and whether another peer was served within 1 s throughout; then `make fuzz` (4 fuzzers, FUZZ_SECONDS
# each). Not part of test.
soak: deps
	$(SWIFT) build -c release --product zerobridge
	$(PY) bench/soak.py
	@$(MAKE) --no-print-directory fuzz

# Fuzzing (fuzz/run.py): each fuzzer of fuzz/ for FUZZ_SECONDS from its committed corpus, fuzz/corpus/NAME; a finding
# fails the target. The Swift targets are compiled by swiftc straight from the Protocol sources, under libFuzzer and
# AddressSanitizer, into .build-fuzz: the package and its builds are untouched (-package-name: those sources use
# `package` access since the modules were split). `make fuzz-corpus` re-minimizes the
# corpora from fuzz/seed.py's seeds (the protocol fixtures) and what fuzzing added.
FUZZ_SECONDS ?= 60
FUZZ_BUILD := .build-fuzz
PROTOCOL_SOURCES := $(wildcard Sources/ZeroBridge/Protocol/*.swift)

$(FUZZ_BUILD)/swift-json: fuzz/swift/FuzzJSONParser.swift $(PROTOCOL_SOURCES)
$(FUZZ_BUILD)/swift-message: fuzz/swift/FuzzMessageDecoder.swift $(PROTOCOL_SOURCES)
$(FUZZ_BUILD)/swift-json $(FUZZ_BUILD)/swift-message:
	@mkdir -p $(FUZZ_BUILD)
	swiftc -swift-version 6 -O -sanitize=fuzzer,address -parse-as-library -use-ld=lld -module-name ZeroBridgeFuzz -package-name ZeroBridge \
	  $(PROTOCOL_SOURCES) $(filter fuzz/swift/%,$^) -o $@

fuzz: deps $(FUZZ_BUILD)/swift-json $(FUZZ_BUILD)/swift-message
	$(PY) fuzz/run.py --seconds $(FUZZ_SECONDS)

fuzz-corpus: deps $(FUZZ_BUILD)/swift-json $(FUZZ_BUILD)/swift-message
	$(PY) fuzz/run.py --minimize

# What signing and CURVE cost (bench/security.py): Python peer to the release host, plain, keyed, CURVE.
bench-security: deps
	$(SWIFT) build -c release --product zerobridge
	$(PY) bench/security.py

clean:
	rm -rf .build $(FUZZ_BUILD) $(VENV) .demo .bench
