#!/usr/bin/env bash
# Runs the examples of README.md and docs/*.md as pasted, against a server
# started the way README.md's "Serve over HTTP" recipe starts it.
#
# Which blocks run is said by the fence's info string (docs/development.md,
# "Examples in the documents"):
#   ```sh test-setup   run once, in document order, in one shell from the
#                      repository root: builds and starts the server
#                      (in the background, its pid in $SERVER); the
#                      variables it sets are exported to every later block
#   ```sh test         run, each in a fresh `bash -euo pipefail` from the
#                      repository root; it must exit 0
#   ```text output     right after a `sh test` block: what its stdout must
#                      be, line by line (`…` stands for any text)
#   ```sh              not run: needs a container, a cluster, a client
#                      program, or is the test suite itself
# On a host the recipe's port 8080 may be taken: every `127.0.0.1:8080`
# and `localhost:8080` in a block becomes a free loopback port (and
# `:9091`, the metrics port, another one); TMPDIR is a fresh directory,
# removed at the end, so `mktemp` files of the examples go there too.
# The server is stopped with SIGTERM at the end, also on failure, and
# must exit 0.
#
# Usage: bash scripts/doc-examples.sh [FILE.md…]   (default: README.md docs/*.md)
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 - "$@" <<'PY'
import ctypes, glob, os, re, shutil, signal, socket, subprocess, sys, tempfile, time

# The server outlives the shell of the setup blocks that started it in the
# background: as a subreaper, we become its parent, can stop it and see
# its exit status.
PR_SET_CHILD_SUBREAPER = 36
ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)

FENCE = re.compile(r"^(\s*)(```+)\s*(.*)$")

def blocks(path):
    """Yields (line, info, body) of every fenced block of `path`."""
    lines = open(path, encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, ticks, info = m.group(1), m.group(2), m.group(3).strip()
        start, body = i + 1, []
        i += 1
        while i < len(lines) and not (lines[i].strip().startswith(ticks) and lines[i].strip().strip("`") == ""):
            line = lines[i]
            body.append(line[len(indent):] if line.startswith(indent) else line.lstrip())
            i += 1
        i += 1
        yield start, info, "\n".join(body) + "\n"

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]

def matches(expected, actual):
    want = [l.rstrip() for l in expected.rstrip("\n").split("\n")]
    got = [l.rstrip() for l in actual.rstrip("\n").split("\n")]
    if len(want) != len(got):
        return False
    for w, g in zip(want, got):
        pattern = ".*".join(re.escape(part) for part in w.split("…"))
        if not re.fullmatch(pattern, g):
            return False
    return True

files = sys.argv[1:] or ["README.md"] + sorted(glob.glob("docs/*.md"))
setup, tests = [], []
for path in files:
    found = list(blocks(path))
    for n, (line, info, body) in enumerate(found):
        if info == "sh test-setup":
            setup.append((path, line, body))
        elif info == "sh test":
            nxt = found[n + 1] if n + 1 < len(found) else None
            expected = nxt[2] if nxt and nxt[1] == "text output" else None
            tests.append((path, line, body, expected))
if not setup:
    sys.exit("doc-examples: no `sh test-setup` block: nothing starts the server")

port, metrics_port = free_port(), free_port()
def localize(body):
    body = re.sub(r"(127\.0\.0\.1|localhost):8080\b", rf"\g<1>:{port}", body)
    return re.sub(r"(127\.0\.0\.1|localhost|0\.0\.0\.0):9091\b", rf"\g<1>:{metrics_port}", body)

scratch = tempfile.mkdtemp(prefix="mcp-exec-doc-examples.")
envfile = os.path.join(scratch, "env")
server_log = os.path.join(scratch, "server.log")
env = dict(os.environ, TMPDIR=scratch)
server = None
started = time.monotonic()

def stop(code):
    """Stops the server (SIGTERM: it must exit 0) and removes the scratch directory."""
    global server
    if server:
        pid, server = server, None
        try:
            os.kill(pid, signal.SIGTERM)
            for _ in range(200):
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    if os.waitstatus_to_exitcode(status) != 0:
                        print(f"doc-examples: the server exited {os.waitstatus_to_exitcode(status)} "
                              "on SIGTERM", file=sys.stderr)
                        code = code or 1
                    break
                time.sleep(0.05)
            else:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                print(f"doc-examples: the server (pid {pid}) outlived SIGTERM by 10 s", file=sys.stderr)
                code = code or 1
        except (ProcessLookupError, ChildProcessError):
            pass
    shutil.rmtree(scratch, ignore_errors=True)
    sys.exit(code)

signal.signal(signal.SIGTERM, lambda *_: stop(143))
signal.signal(signal.SIGINT, lambda *_: stop(130))

def fail(what, path, line, body, output):
    try:
        print(f"doc-examples: {path}:{line}: {what}\n--- block ---\n{body}--- output ---\n{output}",
              file=sys.stderr)
        if os.path.exists(server_log):
            print("--- server log (tail) ---\n" + "".join(open(server_log).readlines()[-20:]),
                  file=sys.stderr)
    finally:
        stop(1)

try:
    # The setup blocks run together in one shell, as a reader pastes them into
    # one terminal; `set -a` exports what they set to the later blocks. The
    # server they start in the background writes to server.log, not to a pipe
    # we would wait on.
    # The trap saves the variables also when a setup block fails, so that a
    # server already started is still known and stopped.
    script = (f'set -a\ntrap \'export -p > "{envfile}"\' EXIT\n'
              + "".join(localize(b) for _, _, b in setup))
    with open(server_log, "w") as log:
        rc = subprocess.call(["bash", "-euo", "pipefail", "-c", script], stdout=log, stderr=log,
                             stdin=subprocess.DEVNULL, env=env)
    out = open(server_log).read()
    exported = open(envfile).read() if os.path.exists(envfile) else ""
    m = re.search(r'^declare -x SERVER="(\d+)"$', exported, re.M)
    server = int(m.group(1)) if m else None
    if rc != 0:
        fail(f"the setup blocks exited {rc}", setup[0][0], setup[0][1], "".join(b for _, _, b in setup), out)
    if server is None:
        fail("the setup blocks set no SERVER (the server's pid)", setup[0][0], setup[0][1], "", out)

    for path, line, body, expected in tests:
        try:
            r = subprocess.run(["bash", "-euo", "pipefail", "-c", f'source "{envfile}"\n' + localize(body)],
                               capture_output=True, text=True, timeout=60, env=env, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired as e:
            fail("did not finish in 60 s", path, line, body, str(e.stdout or ""))
        if r.returncode != 0:
            fail(f"exited {r.returncode}", path, line, body, r.stdout + r.stderr)
        if expected is not None and not matches(localize(expected), r.stdout):
            fail("printed something else than the output shown after it", path, line, body,
                 f"{r.stdout}--- shown ---\n{expected}")

    print(f"doc-examples: {len(setup)} setup and {len(tests)} example blocks of {len(files)} files ran "
          f"as pasted in {time.monotonic() - started:.1f} s")
except SystemExit:
    raise
except BaseException as e:
    print(f"doc-examples: {e!r}", file=sys.stderr)
    stop(1)
stop(0)
PY
