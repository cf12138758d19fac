#!/usr/bin/env bash
# Issue 22's figure: sandboxd's `PUT`/`GET /v1/files/{path}` against mcp-exec's own
# `PUT`/`GET /files/<abs path>` for one large file, in the same run, on loopback, with curl as
# the client for both (the same bytes, the same server process, the two alternating run by run,
# every step after a `sync`). Both end in the same commit (temporary file, SHA-256, fsync,
# rename) and the same streamed read; the figure shows what the façade costs.
#
#   bench/sandboxd-files.sh [BINARY] [MIB] [RUNS]   (default: the release build, 1024 MiB, 3)
#
# Prints one line per transfer (MiB/s) and the medians. Needs curl. Removes what it wrote.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-target/x86_64-unknown-linux-gnu/release/mcp-exec}
mib=${2:-1024}
runs=${3:-3}
dir=$(mktemp -d "${TMPDIR:-/tmp}/mcp-exec-bench-sandboxd.XXXXXX")
server=
cleanup() {
    [[ -n $server ]] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
    rm -rf "$dir"
}
trap cleanup EXIT
mkdir -p "$dir/root"
head -c $((mib << 20)) /dev/urandom >"$dir/src"
"$bin" --http 127.0.0.1:0 --sandboxd-rest 127.0.0.1:0 --sandboxd-root "$dir/root" \
    --no-stdio 2>"$dir/log" &
server=$!
port() { sed -n "s/^mcp-exec: listening for $1 on 127.0.0.1:\([0-9]*\)$/\1/p" "$dir/log"; }
for _ in $(seq 100); do [[ -n $(port HTTP) && -n $(port 'sandboxd REST') ]] && break; sleep 0.1; done
http=$(port HTTP)
rest=$(port 'sandboxd REST')
# MiB/s of one curl transfer (curl's own average speed, bytes/s).
put() { curl -fsS -o /dev/null -T "$dir/src" -w '%{speed_upload}' "$1"; }
get() { curl -fsS -o /dev/null -w '%{speed_download}' "$1"; }
mibs() { awk -v b="$1" 'BEGIN { printf "%.0f", b / 1048576 }'; }
declare -A all
for run in $(seq "$runs"); do
    for api in files v1; do
        sync
        if [[ $api == files ]]; then
            p=$(put "http://127.0.0.1:$http/files$dir/root/f-$run")
            sync
            g=$(get "http://127.0.0.1:$http/files$dir/root/f-$run")
        else
            p=$(put "http://127.0.0.1:$rest/v1/files/v-$run")
            sync
            g=$(get "http://127.0.0.1:$rest/v1/files/v-$run")
        fi
        all[$api-put]+="$(mibs "$p") "
        all[$api-get]+="$(mibs "$g") "
        echo "run $run $api: PUT $(mibs "$p") MiB/s, GET $(mibs "$g") MiB/s"
        rm -f "$dir/root/f-$run" "$dir/root/v-$run"
    done
done
median() { tr ' ' '\n' | grep . | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
for k in files-put v1-put files-get v1-get; do
    echo "median $k: $(echo "${all[$k]}" | median) MiB/s ($mib MiB, $runs runs)"
done
