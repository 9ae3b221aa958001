#!/usr/bin/env bash
# The README's Install section, done as a user would, outside the repository: builds the Python wheel and the npm
# tarball, installs each into a fresh project under a temporary folder and runs that project's tests against the
# built `zerobridge` host; then builds a Swift package that depends on this checkout with `.package(path:)` and runs
# its test. `make test-install` (part of `make test`) runs it; so can you: `bash examples/adopt/run.sh`.
# Environment: PYTHON (a Python with setuptools >= 77, default .venv/bin/python), ZEROBRIDGE_BIN (the built CLI).
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
python=${PYTHON:-$root/.venv/bin/python}
export ZEROBRIDGE_BIN=${ZEROBRIDGE_BIN:-$root/.build/debug/zerobridge}
version=$(cat "$root/VERSION")
scratch=$(mktemp -d "${TMPDIR:-/tmp}/zerobridge-adopt.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
# What the tools below leave in TMPDIR (SwiftPM's TemporaryDirectory.* folders and lock files, npm's and pip's files)
# goes with the scratch folder.
mkdir "$scratch/tmp"
export TMPDIR="$scratch/tmp"
step() { printf '\n== %s (%s)\n' "$1" "$(date +%T)"; }

step "packages: the wheel and the npm tarball"
# --no-build-isolation: built with this environment's setuptools, so nothing is downloaded.
"$python" -m pip wheel --quiet --no-deps --no-build-isolation --wheel-dir "$scratch/dist" "$root/peers/python"
(cd "$root/peers/node" && npm pack --quiet --pack-destination "$scratch/dist" >/dev/null)
ls "$scratch/dist"

step "Python: a project with its own virtual environment, pip install of the wheel"
cp -R "$root/examples/adopt/python" "$scratch/python"
cd "$scratch/python"
"$python" -m venv .venv
.venv/bin/python -m pip install --quiet --disable-pip-version-check "$scratch/dist/zerobridge-$version-py3-none-any.whl" pytest
.venv/bin/python -m pytest -q -p no:cacheprovider test_adopt.py

step "Node: npm init, npm install of the tarball"
mkdir "$scratch/node"
cp "$root/examples/adopt/node/"*.mjs "$scratch/node/"
cd "$scratch/node"
npm init -y >/dev/null
# --offline: a local tarball without dependencies needs no registry (and the npm registry is not reachable here).
npm install --offline --no-audit --no-fund --loglevel=error "$scratch/dist/zerobridge-$version.tgz"
node --test

step "Swift: a package depending on the checkout by .package(path: \"../zerobridge\")"
# The folder's name is the dependency's identity, so the checkout is reached through a link named zerobridge.
ln -s "$root" "$scratch/zerobridge"
cp -R "$root/examples/adopt/swift" "$scratch/calculator"
cd "$scratch/calculator"
swift build --build-tests --scratch-path "$scratch/calculator/.build" 2>&1 | tee "$scratch/swift-build.log"
# The core product alone: neither the job journal's SQLite (GRDB) nor process launching (swift-subprocess) is
# built (modules by capability: they come with ZeroBridgeJobs and ZeroBridgeSupervision). SwiftPM still fetches
# them: it resolves every package a manifest lists, whichever products are used.
# (It also plans their targets: GRDB.build and Subprocess.build hold build files, but no object files.)
if grep -E 'Compiling (GRDB|Subprocess) ' "$scratch/swift-build.log" \
    || find "$scratch/calculator/.build/debug/" -path '*/GRDB.build/*.o' -o -path '*/Subprocess.build/*.o' | grep .; then
    echo "a package that depends on the product ZeroBridge alone built GRDB or swift-subprocess" >&2
    exit 1
fi
swift test --skip-build --scratch-path "$scratch/calculator/.build"

step "The DocC tutorial: its calculator host, its Python and Node front-ends and its fixture test"
# The tutorial (Sources/ZeroBridge/ZeroBridge.docc/Tutorials) shows these very files, linked into its Resources.
cp -R "$root/examples/adopt/fixtures" "$scratch/fixtures"
mkfifo "$scratch/calculator-ready"
"$scratch/calculator/.build/debug/calculator-host" 'tcp://127.0.0.1:*' >"$scratch/calculator-ready" &
calculator=$!
trap 'kill "$calculator" 2>/dev/null || true; rm -rf "$scratch"' EXIT
exec {ready}<"$scratch/calculator-ready"   # kept open, so a later line on stdout cannot end the host with SIGPIPE
read -r -t 120 -u "$ready" word state endpoint
[ "$word $state" = "calculator ready" ] || { echo "the calculator host did not start: $word $state $endpoint"; exit 1; }
expected=$'2 + 3 = 5\ncounted 1\ncounted 2\ncounted 3\ndone: 3'
got=$(cd "$scratch/python" && .venv/bin/python frontend.py "$endpoint")
[ "$got" = "$expected" ] || { printf 'frontend.py printed:\n%s\n' "$got"; exit 1; }
got=$(cd "$scratch/node" && node frontend.mjs "$endpoint")
[ "$got" = "$expected" ] || { printf 'frontend.mjs printed:\n%s\n' "$got"; exit 1; }
(cd "$scratch/python" && ZEROBRIDGE_ENDPOINT="$endpoint" .venv/bin/python -m pytest -q -p no:cacheprovider test_calculator_fixtures.py)
kill -TERM "$calculator"
wait "$calculator" || { echo "the calculator host did not stop cleanly on SIGTERM (exit $?)"; exit 1; }
step "done"
