#!/bin/bash
# Where the host's CPU time goes: `perf record -e cpu-clock` (the software clock: these VMs expose no hardware
# counters) of a release `zerobridge serve --conformance` while the Swift peer keeps 64 calls in flight over tcp.
#
#   bench/profile/perf_host.sh [keyed|plain|curve] [BIN_DIR] [SECONDS]
#
# keyed is the default (as with a connection file), plain is --no-key, curve is --curve (CURVE + keyed). Prints the
# peer's result line, the host's CPU us per request (from /proc/PID/stat over the profiled run), then the top
# functions by their own samples, demangled, and the share of the signing code with what it calls. Needs perf (Debian: linux-perf) and a release build.
set -euo pipefail
mode=${1:-keyed}
bin=${2:-.build/release}
seconds=${3:-5}
case $mode in
  keyed) options=() ;;
  plain) options=(--no-key) ;;
  curve) options=(--curve) ;;
  *) echo "mode: keyed, plain or curve" >&2; exit 2 ;;
esac
command -v perf > /dev/null || { echo "perf is missing: apt-get install linux-perf" >&2; exit 1; }

before_cleanup() { if [ -n "${KEEP_PERF_DATA:-}" ]; then cp "$folder/perf.data" "$KEEP_PERF_DATA"; fi; }
source "$(dirname "$0")/host.sh"
start_host "${options[@]}"

"$bin/zerobridge-bench" peer --endpoint "$folder/connection.json" --window 64 --seconds 1 > /dev/null  # warm up
ticks() { awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$host/stat"; }
before=$(ticks)
perf record -q -g -e cpu-clock -F 4000 -p "$host" -o "$folder/perf.data" 2> "$folder/perf.log" &
recorder=$!
result=$("$bin/zerobridge-bench" peer --endpoint "$folder/connection.json" --window 64 --seconds "$seconds")
kill -INT "$recorder" 2> /dev/null || { cat "$folder/perf.log" >&2; exit 1; }; wait "$recorder" || true
after=$(ticks)
echo "$result"
requests=$(python3 -c 'import json, sys; r = json.loads(sys.argv[1]); print(r["requests"] + r["warmup"])' "$result")
python3 -c 'import os, sys; t, n = int(sys.argv[1]), int(sys.argv[2]); us = t / os.sysconf("SC_CLK_TCK") * 1e6 / n
print(f"host cpu {us:.1f} us per request (its warm-up included, perf recording)")' "$((after - before))" "$requests"
perf report -i "$folder/perf.data" --no-children --sort sym --stdio -g none --percent-limit 0.7 2> /dev/null \
  | grep '%' | sed 's/ *$//' | swift demangle --simplified | sed 's/  */ /g'
echo "signing and checking (samples with these on the stack, frame pointers):"
perf report -i "$folder/perf.data" --children --sort sym --stdio -g none 2> /dev/null | grep '%' | swift demangle --simplified \
  | grep -E 'KeyedConnections\.receive|KeyedChannel\.(accept|sign)|Signature\.(message|opening|authenticationCode|parse)' \
  | sed 's/  */ /g' | head -8
