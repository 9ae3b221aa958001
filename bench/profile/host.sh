# Sourced by the profile scripts: starts a release `zerobridge serve --conformance` from "$bin" over tcp, with a
# connection file in a new folder, and waits until it listens. Its arguments are the host's security options
# (--no-key, --curve, or none for keyed). Sets `folder` (the connection file is "$folder/connection.json") and `host`
# (its PID); at exit the host is stopped and the folder removed, after the caller's `before_cleanup` if it defines
# one.
start_host() {
  folder=$(mktemp -d)
  host=""
  trap 'declare -F before_cleanup > /dev/null && before_cleanup; [ -n "$host" ] && kill "$host" 2> /dev/null; rm -rf "$folder"' EXIT
  "$bin/zerobridge" serve --conformance --endpoint 'tcp://127.0.0.1:*' --max-in-flight 20000 \
    --connection-file "$folder/connection.json" "$@" > "$folder/ready" 2> /dev/null &
  host=$!
  for _ in $(seq 100); do [ -s "$folder/ready" ] && break; sleep 0.1; done
  [ -s "$folder/ready" ] || { echo "the host did not start" >&2; exit 1; }
}
