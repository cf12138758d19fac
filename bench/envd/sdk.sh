#!/usr/bin/env bash
# Issue 24's figures, through the e2b SDK (interop/e2b, pinned) against --envd on loopback:
#   - commands.run("true"): p50/p90/p99 of N calls (default 500) after 10 warm-up calls, and
#     beside it what the SDK's command costs without mcp-exec: `/bin/bash -l -c true` spawned
#     and waited by the same Python (subprocess), the same N times;
#   - the daemon's peak RSS (VmHWM) after the SDK scenarios of tests/envd.rs (run, background,
#     kill, stdin, pty, burst of 200, detached), and its RSS idle before them.
# The server runs with HOME set to an empty directory: the SDK starts every command as a login
# bash, which reads ~/.bashrc via the system profile on some machines (pyenv there costs 0.5 s).
# Usage: bench/envd/sdk.sh [BINARY] [N]   (BINARY: default the static release build)
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
bin=${1:-$repo/target/x86_64-unknown-linux-gnu/release/mcp-exec}
n=${2:-500}
py=$repo/interop/e2b/.venv/bin/python
client=$repo/interop/e2b/envd_client.py
[[ -x $py ]] || bash "$repo/interop/run.sh" --install-e2b
home=$(mktemp -d); log=$(mktemp)
HOME=$home "$bin" --envd 127.0.0.1:0 --no-stdio 2>"$log" & pid=$!
trap 'kill $pid 2>/dev/null; rm -rf "$home" "$log"' EXIT
for _ in $(seq 100); do
    port=$(grep -o 'envd on 127.0.0.1:[0-9]*' "$log" | cut -d: -f2 || true)
    [[ -n $port ]] && break
    sleep 0.1
done
rss() { awk -v k="$1:" '$1 == k { print $2 }' "/proc/$pid/status"; }
echo "binary: $bin ($(stat -c %s "$bin") bytes)"
echo "idle RSS: $(rss VmRSS) KiB"
echo "commands.run(\"true\"), $n calls: $("$py" "$client" "$port" timing "$n")"
HOME=$home "$py" - "$n" <<'PY'
import subprocess, sys, time
n = int(sys.argv[1])
s = []
for i in range(n + 10):
    t0 = time.perf_counter()
    subprocess.run(["/bin/bash", "-l", "-c", "true"], check=True)
    if i >= 10:
        s.append((time.perf_counter() - t0) * 1000)
s.sort()
print(f"baseline: /bin/bash -l -c true from Python, {n} calls: p50 {s[n // 2]:.3f} ms, p90 {s[n * 9 // 10]:.3f} ms")
PY
for scenario in run background kill stdin pty burst detached; do
    "$py" "$client" "$port" "$scenario" >/dev/null || echo "scenario $scenario FAILED" >&2
done
echo "after the SDK scenarios: RSS $(rss VmRSS) KiB, peak RSS (VmHWM) $(rss VmHWM) KiB"
