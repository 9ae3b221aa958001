# ZeroBridge: `make demo` and `make test` work from a fresh clone on a fresh Debian machine.
SHELL := /bin/bash
.DEFAULT_GOAL := test

VENV      := .venv
PY        := $(VENV)/bin/python
SUDO      := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
SWIFT_BIN := .build/debug
export ZEROBRIDGE_BIN := $(CURDIR)/$(SWIFT_BIN)/zerobridge

.PHONY: deps deps-system deps-python build test test-swift test-protocol test-python test-node test-examples demo bench soak fuzz fuzz-corpus bench-security clean

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
	[ -f /usr/share/nodejs/tweetnacl/package.json ] || missing="$$missing node-tweetnacl"; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi

# setuptools 77 reads pyproject's SPDX license; test-install builds the wheel with this environment's, offline.
deps-python: $(VENV)/.installed

# rfc8785 is the reference of the differential tests, atheris the Python fuzzer (fuzz/); opentelemetry-api is the
# peer's optional tracing (zerobridge[otel]) and the reference of its trace-context parser, opentelemetry-sdk the
# in-memory exporter of the cross-language trace test.
$(VENV)/.installed: peers/python/pyproject.toml Makefile
	@[ -x $(PY) ] || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q pyzmq pytest pytest-timeout jsonschema tqdm mypy rfc8785 atheris opentelemetry-api opentelemetry-sdk
	$(PY) -m pip install -q -e peers/python
	$(PY) -m pip install -q 'setuptools>=77'
	@touch $@

# --- building -------------------------------------------------------------------------------
build: deps-system
	swift build --build-tests

# --- tests: every suite the repo has; any failure fails the target -------------------------
test: deps build
	@$(MAKE) --no-print-directory test-swift test-protocol test-python test-node test-examples test-install

# Every suite has a time limit (3 minutes a test); this bounds the whole run too, so a hang fails instead of waiting.
test-swift:
	timeout 1500 swift test --skip-build

# A test that hangs past 300 s fails the run with every thread's stack, instead of hanging CI.
PYTEST := $(PY) -m pytest -q --timeout 300 --timeout-method thread

test-protocol:
	$(PYTEST) protocol/tests

test-python:
	$(PYTEST) peers/python/tests

test-node:
	node --test peers/node/test/

# The import service end to end: the built import host, the Node ETL peer and both front-ends, as processes;
# and the clients `zerobridge types` generates, type-checked (mypy --strict) and run against a live host.
test-examples:
	$(PYTEST) examples/tests
	node --test examples/etl-peer/test/ examples/tests-node/

# The install story as a user follows it (README, Install), outside the repository: the wheel and the npm tarball
# installed into scratch Python and Node projects, and a Swift package depending on this checkout by path, each
# running its tests against the built host (examples/adopt/run.sh); and every place that repeats VERSION agrees.
.PHONY: test-install install
test-install:
	$(PYTEST) examples/adopt/test_versions.py
	PYTHON=$(CURDIR)/$(PY) timeout 1500 bash examples/adopt/run.sh

# --- installing the CLI: a release build of zerobridge copied to $(PREFIX)/bin ---------------
PREFIX ?= /usr/local
install: deps-system
	swift build -c release --product zerobridge
	install -d "$(DESTDIR)$(PREFIX)/bin"
	install -m 0755 "$$(swift build -c release --show-bin-path)/zerobridge" "$(DESTDIR)$(PREFIX)/bin/zerobridge"
	@echo "installed $(DESTDIR)$(PREFIX)/bin/zerobridge"

# --- the main job ---------------------------------------------------------------------------
# Builds only what the demo runs, so a fresh clone gets there sooner than with the whole test build.
demo: deps
	@$(PY) -c 'import tqdm' 2>/dev/null || $(PY) -m pip install -q tqdm
	swift build --product import-host
	swift build --product zerobridge
	$(PY) examples/demo.py

# --- benchmarks (not part of test): bench/run.py (and bench/import_service.py: the job journal's cost); the wall time printed includes deps and the release build ---
bench:
	@started=$$(date +%s.%N); \
	$(MAKE) --no-print-directory deps && \
	swift build -c release --product zerobridge-bench && \
	swift build -c release --product zerobridge && \
	swift build -c release --product import-host && \
	$(PY) bench/run.py --started $$started

# Hostile and unlucky clients against a release conformance host (bench/soak.py, about 5 minutes after the build):
# its peak memory, and whether another peer was served within 1 s throughout; then `make fuzz` (4 fuzzers, FUZZ_SECONDS
# each). Not part of test.
soak: deps
	swift build -c release --product zerobridge
	$(PY) bench/soak.py
	@$(MAKE) --no-print-directory fuzz

# Fuzzing (fuzz/run.py): each fuzzer of fuzz/ for FUZZ_SECONDS from its committed corpus, fuzz/corpus/NAME; a finding
# fails the target. The Swift targets are compiled by swiftc straight from the Protocol sources, under libFuzzer and
# AddressSanitizer, into .build-fuzz: the package and its builds are untouched. `make fuzz-corpus` re-minimizes the
# corpora from fuzz/seed.py's seeds (the protocol fixtures) and what fuzzing added.
FUZZ_SECONDS ?= 60
FUZZ_BUILD := .build-fuzz
PROTOCOL_SOURCES := $(wildcard Sources/ZeroBridge/Protocol/*.swift)

$(FUZZ_BUILD)/swift-json: fuzz/swift/FuzzJSONParser.swift $(PROTOCOL_SOURCES)
$(FUZZ_BUILD)/swift-message: fuzz/swift/FuzzMessageDecoder.swift $(PROTOCOL_SOURCES)
$(FUZZ_BUILD)/swift-json $(FUZZ_BUILD)/swift-message:
	@mkdir -p $(FUZZ_BUILD)
	swiftc -swift-version 6 -O -sanitize=fuzzer,address -parse-as-library -use-ld=lld -module-name ZeroBridgeFuzz \
	  $(PROTOCOL_SOURCES) $(filter fuzz/swift/%,$^) -o $@

fuzz: deps $(FUZZ_BUILD)/swift-json $(FUZZ_BUILD)/swift-message
	$(PY) fuzz/run.py --seconds $(FUZZ_SECONDS)

fuzz-corpus: deps $(FUZZ_BUILD)/swift-json $(FUZZ_BUILD)/swift-message
	$(PY) fuzz/run.py --minimize

# What signing and CURVE cost (bench/security.py): Python peer to the release host, plain, keyed, CURVE.
bench-security: deps
	swift build -c release --product zerobridge
	$(PY) bench/security.py

clean:
	rm -rf .build $(FUZZ_BUILD) $(VENV) .demo .bench
