#!/usr/bin/env bash
# Runs the shell examples of README.md and docs/*.md byte for byte, as a newcomer pastes them
# (docs/development.md, "Examples in the documents"):
#
# - each document in a fresh shell of its own: `bash --login` under `env -i`, with a new HOME
#   whose ~/.profile puts the installed mcp-exec (PREFIX/bin) and cargo on PATH, as the install
#   step and rustup leave a machine, from the repository root; only the machine's proxy and
#   certificate-authority variables pass through, and the shared cargo target, pip and npm
#   caches (a second cold build or download is not what the examples test);
# - every fenced block whose info string is sh, bash, shell or console, in document order,
#   unchanged (of a console block, the `$ ` lines are the commands), its stdin /dev/null;
#   the shell has errtrace and pipefail set, and an ERR trap;
# - a block fails when any command in it fails outside a condition (an ERR trap records it),
#   when it exits the shell, or when it runs past 10 minutes; a ```text output block right
#   after a block, and the lines of a console block that are not commands, are its expected
#   stdout, line by line, `…` standing for any text;
# - a block is skipped only when the paragraph just before its fence says *Illustrative*
#   (visible in the document, with why it cannot run here); a fence without an info string
#   is an error, so that no shell block hides as plain text;
# - when a document's shell ends, every process it left (found by a mark in its environment)
#   gets SIGTERM and must be gone within 10 s.
#
# Usage: bash scripts/doc-examples.sh [FILE.md…]   (default: README.md docs/*.md)
# PREFIX: MCP_EXEC_DOC_PREFIX, where `bash scripts/install.sh PREFIX` installed mcp-exec
# (scripts/test.sh passes its own); unset, the script installs into a scratch prefix first.
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 - "$@" <<'PY'
import ctypes, glob, os, re, select, shutil, signal, subprocess, sys, tempfile, time

# Servers a document starts in the background outlive its shell: as a subreaper we become
# their parent, so that we can end and reap them.
PR_SET_CHILD_SUBREAPER = 36
ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)

FENCE = re.compile(r"^(\s*)(```+)\s*(.*)$")
SHELLS = {"sh", "bash", "shell", "console"}
BLOCK_LIMIT = 600
NETWORK = ["http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY",
           "NODE_EXTRA_CA_CERTS", "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE",
           "CURL_CA_BUNDLE", "PIP_CERT"]
repo = os.getcwd()

def blocks(path):
    """Yields (line, info, body, marked) of every fenced block of `path`."""
    lines = open(path, encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, ticks, info = m.group(1), m.group(2), m.group(3).strip()
        # The paragraph just before the fence.
        j = i - 1
        while j >= 0 and not lines[j].strip():
            j -= 1
        paragraph = []
        while j >= 0 and lines[j].strip() and not FENCE.match(lines[j]):
            paragraph.append(lines[j])
            j -= 1
        before = " ".join(paragraph)
        start, body = i + 1, []
        i += 1
        while i < len(lines) and not (lines[i].strip().startswith(ticks) and lines[i].strip().strip("`") == ""):
            line = lines[i]
            body.append(line[len(indent):] if line.startswith(indent) else line.lstrip())
            i += 1
        i += 1
        yield start, info, "\n".join(body) + "\n", "*Illustrative*" in before

def console_split(body):
    """A console block's commands (`$ ` lines and their `\\` continuations) and the rest."""
    commands, expected, continued = [], [], False
    for line in body.rstrip("\n").split("\n"):
        if continued or line.startswith("$ "):
            commands.append(line if continued else line[2:])
            continued = line.endswith("\\")
        else:
            expected.append(line)
    return "\n".join(commands) + "\n", ("\n".join(expected) + "\n") if expected else None

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

scratch = tempfile.mkdtemp(prefix="mcp-exec-doc-examples.")
failures = []

def install_prefix():
    prefix = os.environ.get("MCP_EXEC_DOC_PREFIX")
    if prefix:
        return prefix
    prefix = os.path.join(scratch, "prefix")
    subprocess.run(["bash", "scripts/install.sh", prefix], check=True, stdin=subprocess.DEVNULL)
    return prefix

def mine(mark):
    """Pids of processes whose environment carries `mark`."""
    found = []
    needle = mark.encode()
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            with open(f"/proc/{d}/environ", "rb") as f:
                if needle in f.read().split(b"\0"):
                    found.append(int(d))
        except OSError:
            pass
    return found

def reap():
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return

def signal_all(pids, sig):
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass

def end_leftovers(mark, doc):
    """SIGTERM to what a document left running; what outlives 10 s is killed and reported."""
    signal_all(mine(mark), signal.SIGTERM)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        reap()
        if not mine(mark):
            return
        time.sleep(0.05)
    stubborn = mine(mark)
    signal_all(stubborn, signal.SIGKILL)
    reap()
    failures.append(f"{doc}: processes outlived SIGTERM by 10 s: {stubborn}")

class Shell:
    """One document's `bash --login`, fed one `source` line per block."""

    def __init__(self, prefix, n):
        self.dir = os.path.join(scratch, f"doc{n}")
        home = os.path.join(self.dir, "home")
        os.makedirs(home)
        real_home = os.path.expanduser("~")
        cargo_home = os.environ.get("CARGO_HOME", os.path.join(real_home, ".cargo"))
        rustup_home = os.environ.get("RUSTUP_HOME", os.path.join(real_home, ".rustup"))
        # What the install step (its PATH advice) and rustup's installer leave in ~/.profile.
        with open(os.path.join(home, ".profile"), "w") as f:
            f.write(f'export CARGO_HOME="{cargo_home}" RUSTUP_HOME="{rustup_home}"\n'
                    f'export PATH="{prefix}/bin:{cargo_home}/bin:$PATH"\n')
        self.mark = f"MCP_EXEC_DOC_EXAMPLE={os.getpid()}-{n}"
        env = {"HOME": home, "PATH": "/usr/local/bin:/usr/bin:/bin", "TERM": "dumb",
               "LANG": "C.UTF-8", "USER": os.environ.get("USER", "root"),
               "LOGNAME": os.environ.get("LOGNAME", "root"),
               # Shared caches only: the second cold build of the binary, and the second
               # download of a pinned package, are not what these examples test.
               "CARGO_TARGET_DIR": os.path.join(repo, "target"),
               "PIP_CACHE_DIR": os.path.join(real_home, ".cache", "pip"),
               "npm_config_cache": os.path.join(real_home, ".npm")}
        # The machine's way to the registries (a proxy, its certificate authorities) is the
        # machine's, not the newcomer's shell's: a newcomer's machine has it set up already.
        for k in NETWORK:
            if k in os.environ:
                env[k] = os.environ[k]
        if "MCP_EXEC_TEST_RUN" in os.environ:
            env["MCP_EXEC_TEST_RUN"] = os.environ["MCP_EXEC_TEST_RUN"]
        k, v = self.mark.split("=", 1)
        env[k] = v
        self.errors = os.path.join(self.dir, "errors")
        prelude = os.path.join(self.dir, "prelude.sh")
        with open(prelude, "w") as f:
            # pipefail: a `curl -f … | jq` whose curl failed fails too. The trap skips the
            # harness's own `source` line, whose status is the block's and is judged apart.
            f.write("set -o errtrace -o pipefail\n"
                    f"trap '__s=$?; case $BASH_COMMAND in \"source '\\''{self.dir}/\"*) ;; *) "
                    f"printf \"line %s of the block: %s (exit %s)\\n\" \"$LINENO\" "
                    f"\"$BASH_COMMAND\" \"$__s\" >> \"{self.errors}\";; esac' ERR\n")
        self.proc = subprocess.Popen(["env", "-i"] + [f"{k}={v}" for k, v in env.items()]
                                     + ["bash", "--login"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, cwd=repo)
        self.buffer = b""
        self.send(f"source '{prelude}'\n")

    def send(self, text):
        self.proc.stdin.write(text.encode())
        self.proc.stdin.flush()

    def run(self, n, body):
        """Runs one block; returns (status or None when the shell ended, stdout, stderr, errors)."""
        script = os.path.join(self.dir, f"block{n}.sh")
        out, err = script + ".out", script + ".err"
        with open(script, "w") as f:
            f.write(body)
        open(self.errors, "w").close()
        marker = f"::doc-examples-block-{n}-done"
        self.send(f"source '{script}' </dev/null >'{out}' 2>'{err}'; printf '\\n{marker} %s\\n' \"$?\"\n")
        deadline = time.monotonic() + BLOCK_LIMIT
        status = None
        while True:
            m = re.search(rb"\n" + re.escape(marker.encode()) + rb" (\d+)\n", self.buffer)
            if m:
                status = int(m.group(1))
                self.buffer = self.buffer[m.end():]
                break
            left = deadline - time.monotonic()
            if left <= 0:
                status = "timeout"
                break
            ready, _, _ = select.select([self.proc.stdout], [], [], left)
            if ready:
                chunk = os.read(self.proc.stdout.fileno(), 65536)
                if not chunk:
                    break
                self.buffer += chunk
        read = lambda p: open(p, errors="replace").read() if os.path.exists(p) else ""
        return status, read(out), read(err), read(self.errors)

    def close(self):
        try:
            self.send("exit\n")
            self.proc.stdin.close()
        except BrokenPipeError:
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

def run_document(path, prefix, n):
    found = list(blocks(path))
    ran = marked = 0
    shell = None
    try:
        for k, (line, info, body, is_marked) in enumerate(found):
            lang = info.split()[0] if info else ""
            if not lang:
                failures.append(f"{path}:{line}: a fence without an info string (say sh, text, json, …)")
                return ran, marked
            if lang not in SHELLS:
                continue
            if is_marked:
                marked += 1
                continue
            expected = None
            if lang == "console":
                body, expected = console_split(body)
            nxt = found[k + 1] if k + 1 < len(found) else None
            if nxt and nxt[1] == "text output":
                expected = nxt[2]
            if shell is None:
                shell = Shell(prefix, n)
            status, out, err, errors = shell.run(k, body)
            ran += 1
            what = None
            if status is None:
                what = "ended the document's shell"
            elif status == "timeout":
                what = f"did not finish in {BLOCK_LIMIT} s"
            elif status != 0 or errors:
                what = f"failed (exit {status})"
            elif expected is not None and not matches(expected, out):
                what = "printed something else than the output shown after it"
            if what:
                failures.append(f"{path}:{line}: the block {what}\n--- block ---\n{body}"
                                f"--- stdout ---\n{out}"
                                + (f"--- shown ---\n{expected}" if expected is not None else "")
                                + f"--- stderr ---\n{err[-4000:]}"
                                + (f"--- failed commands ---\n{errors}" if errors else ""))
                return ran, marked
        return ran, marked
    finally:
        if shell:
            shell.close()
            end_leftovers(shell.mark, path)

def stop(code):
    shutil.rmtree(scratch, ignore_errors=True)
    sys.exit(code)

signal.signal(signal.SIGTERM, lambda *_: stop(143))
signal.signal(signal.SIGINT, lambda *_: stop(130))

started = time.monotonic()
try:
    files = sys.argv[1:] or ["README.md"] + sorted(glob.glob("docs/*.md"))
    prefix = install_prefix()
    report = []
    for n, path in enumerate(files):
        t = time.monotonic()
        ran, marked = run_document(path, prefix, n)
        report.append(f"{ran:4d} run {marked:3d} illustrative {time.monotonic() - t:6.1f} s  {path}")
        if failures:
            break
    print("doc-examples: blocks per document\n" + "\n".join(report))
    if failures:
        print("doc-examples: " + "\n\ndoc-examples: ".join(failures), file=sys.stderr)
        stop(1)
    print(f"doc-examples: {len(files)} documents ran as pasted in {time.monotonic() - started:.1f} s")
except SystemExit:
    raise
except BaseException as e:
    print(f"doc-examples: {e!r}", file=sys.stderr)
    stop(1)
stop(0)
PY
