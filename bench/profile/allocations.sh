#!/bin/bash
# Heap allocations per call: glibc `malloc` calls counted with a uprobe (perf) in a release `zerobridge-bench peer`
# and in the `zerobridge serve --conformance` host it calls, over N echo calls at a window of W, over tcp.
#
#   bench/profile/allocations.sh [plain|keyed] [BIN_DIR] [N] [W]
#
# Prints each side's mallocs per call (warm-up included in the count and in the division). Every allocation of the
# Swift side goes through malloc (swift_slowAlloc), so this counts objects, closure contexts, boxes and array
# buffers alike; `perf record -e probe_libc:malloc --call-graph dwarf` on the same probe says where they come from.
# Needs perf (Debian: linux-perf) and root, for the uprobe on libc.
set -euo pipefail
mode=${1:-plain}
bin=${2:-.build/release}
calls=${3:-200000}
window=${4:-1024}
case $mode in
  plain) options=(--no-key) ;;
  keyed) options=() ;;
  *) echo "mode: plain or keyed" >&2; exit 2 ;;
esac
command -v perf > /dev/null || { echo "perf is missing: apt-get install linux-perf" >&2; exit 1; }
libc=$(ldconfig -p | awk '/libc\.so\.6 .*x86-64/ { print $NF; exit }')
perf probe -q -x "$libc" --add malloc 2> /dev/null || perf probe -l 2>/dev/null | grep -q 'probe_libc:malloc ' \
  || { echo "could not add a uprobe on $libc malloc (root is needed)" >&2; exit 1; }

source "$(dirname "$0")/host.sh"
start_host "${options[@]}"

perf stat -e probe_libc:malloc -p "$host" -o "$folder/host.stat" &
counter=$!
sleep 0.2
perf stat -e probe_libc:malloc -o "$folder/peer.stat" "$bin/zerobridge-bench" peer --endpoint "$folder/connection.json" \
  --window "$window" --max "$calls" --warmup 1000 --seconds 600 > /dev/null
kill -INT "$counter"; wait "$counter" || true
python3 - "$folder" "$((calls + 1000))" "$mode" "$window" <<'PY'
import re, sys
folder, calls, mode, window = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
for side in ("peer", "host"):
    text = open(f"{folder}/{side}.stat").read()
    count = int(re.search(r"([\d,]+)\s+probe_libc:malloc", text).group(1).replace(",", ""))
    print(f"{side}: {count / calls:.2f} mallocs per call ({mode}, window {window}, {calls:,} calls)")
PY
