"""The e2b SDK's files.* calls against mcp-exec's envd listener (debug mode).

    fs_suite.py suite URL WORKDIR HOME    every check below; prints `ok <name>` per check
    fs_suite.py policy URL INSIDE OUTSIDE  under MCP_EXEC_ALLOWED_CWDS=INSIDE: INSIDE works,
                                          every call on OUTSIDE is refused naming the policy
    fs_suite.py bench URL HTTP_URL TOKEN WORKDIR [ROUNDS]
                                          4 MiB write/read: the SDK through envd vs our /files

Run by tests/envd_files.rs (the suite) and bench/envd_files.sh (the figure). WORKDIR is an
absolute directory that need not exist (made through the SDK); HOME is the server's $HOME,
against which relative paths resolve. Every check compares values; a failure raises (exit 1).
"""

import asyncio
import io
import json
import sys
import time

from e2b import AsyncSandbox, FileType, NotFoundException, Sandbox
from e2b.sandbox.filesystem.watch_handle import FilesystemEventType


def check(name, cond, detail=""):
    if not cond:
        raise AssertionError(f"{name}: {detail}")


def done(name):
    print(f"ok {name}", flush=True)


def poll_events(handle, want, within=20.0):
    """get_new_events() until every (type, name) in `want` was seen; returns all events."""
    seen = []
    deadline = time.monotonic() + within
    while True:
        seen.extend(handle.get_new_events())
        got = {(e.type, e.name) for e in seen}
        if all(w in got for w in want):
            return seen
        if time.monotonic() > deadline:
            raise AssertionError(f"events {want} not all seen within {within} s: {seen}")
        time.sleep(0.05)


def suite(url, work, home):
    sbx = Sandbox.create(debug=True, sandbox_url=url)
    fs = sbx.files

    # make_dir: True, then False (already exists); parents made.
    check("make_dir", fs.make_dir(f"{work}/sub/deeper") is True)
    check("make_dir again", fs.make_dir(f"{work}/sub/deeper") is False)
    done("make_dir")

    # write: str, bytes, a binary file-like object (octet-stream, streamed), an iterable.
    w = fs.write(f"{work}/a.txt", "hello\n")
    check("write str info", (w.name, w.path, w.type) == ("a.txt", f"{work}/a.txt", FileType.FILE), w)
    blob = bytes(range(256)) * 64
    w = fs.write(f"{work}/b.bin", blob)
    check("write bytes info", w.path == f"{work}/b.bin", w)
    fs.write(f"{work}/c.bin", io.BytesIO(blob[::-1]))
    fs.write(f"{work}/d.txt", iter([b"it", b"er", b"able"]))
    many = fs.write_files([
        {"path": f"{work}/m1.txt", "data": "one"},
        {"path": f"{work}/sub/m2.txt", "data": b"two"},
    ])
    check("write_files", sorted(i.path for i in many) == [f"{work}/m1.txt", f"{work}/sub/m2.txt"], many)
    done("write")

    # read: text, bytes, stream; each the bytes written.
    check("read text", fs.read(f"{work}/a.txt") == "hello\n")
    check("read bytes", bytes(fs.read(f"{work}/b.bin", format="bytes")) == blob)
    check("read file-like write", bytes(fs.read(f"{work}/c.bin", format="bytes")) == blob[::-1])
    check("read iterable write", fs.read(f"{work}/d.txt") == "iterable")
    check("read write_files", (fs.read(f"{work}/m1.txt"), fs.read(f"{work}/sub/m2.txt")) == ("one", "two"))
    streamed = b"".join(fs.read(f"{work}/b.bin", format="stream"))
    check("read stream", streamed == blob, len(streamed))
    try:
        fs.read(f"{work}/missing.txt")
        raise AssertionError("read of a missing file did not raise")
    except NotFoundException:
        pass
    done("read")

    # Relative paths resolve against the server's $HOME.
    fs.write("rel-e2b-suite.txt", "relative")
    check("relative read", fs.read(f"{home}/rel-e2b-suite.txt") == "relative")
    fs.remove("rel-e2b-suite.txt")
    check("relative remove", fs.exists(f"{home}/rel-e2b-suite.txt") is False)
    done("relative")

    # exists / get_info.
    check("exists file", fs.exists(f"{work}/a.txt") is True)
    check("exists dir", fs.exists(f"{work}/sub") is True)
    check("exists missing", fs.exists(f"{work}/nope") is False)
    info = fs.get_info(f"{work}/b.bin")
    check("info name/type/path", (info.name, info.type, info.path) == ("b.bin", FileType.FILE, f"{work}/b.bin"), info)
    check("info size", info.size == len(blob), info.size)
    check("info mode", info.mode == 0o644 and info.permissions == "-rw-r--r--", (info.mode, info.permissions))
    check("info owner", info.owner != "" and info.group != "", info)
    check("info mtime", abs(info.modified_time.timestamp() - time.time()) < 600, info.modified_time)
    check("info no symlink", info.symlink_target is None, info)
    d = fs.get_info(f"{work}/sub")
    check("dir info", (d.type, d.permissions[0]) == (FileType.DIR, "d"), d)
    done("get_info")

    # list: depth 1 and 2.
    one = fs.list(work)
    check("list depth 1", sorted(e.name for e in one) == ["a.txt", "b.bin", "c.bin", "d.txt", "m1.txt", "sub"],
          [e.name for e in one])
    by_name = {e.name: e for e in one}
    check("list types", by_name["sub"].type == FileType.DIR and by_name["a.txt"].type == FileType.FILE, one)
    check("list sizes", by_name["a.txt"].size == 6 and by_name["b.bin"].size == len(blob), one)
    two = fs.list(work, depth=2)
    paths = sorted(e.path for e in two)
    check("list depth 2", f"{work}/sub/deeper" in paths and f"{work}/sub/m2.txt" in paths
          and f"{work}/sub/deeper/x" not in paths, paths)
    check("list depth 2 count", len(two) == len(one) + 2, paths)
    done("list")

    # rename.
    r = fs.rename(f"{work}/a.txt", f"{work}/renamed.txt")
    check("rename info", (r.name, r.path, r.type, r.size) == ("renamed.txt", f"{work}/renamed.txt", FileType.FILE, 6), r)
    check("rename old gone", fs.exists(f"{work}/a.txt") is False)
    check("rename content", fs.read(f"{work}/renamed.txt") == "hello\n")
    done("rename")

    # remove: a file, then a directory with contents.
    fs.remove(f"{work}/renamed.txt")
    check("remove file", fs.exists(f"{work}/renamed.txt") is False)
    fs.remove(f"{work}/sub")
    check("remove dir", fs.exists(f"{work}/sub") is False and fs.exists(f"{work}/sub/m2.txt") is False)
    done("remove")

    # watch_dir, sync (CreateWatcher / GetWatcherEvents / RemoveWatcher).
    wdir = f"{work}/watched"
    fs.make_dir(wdir)
    fs.write(f"{wdir}/old.txt", "x")
    h = fs.watch_dir(wdir)
    fs.write(f"{wdir}/new.txt", "new")
    events = poll_events(h, [(FilesystemEventType.CREATE, "new.txt")])
    names = {e.name for e in events}
    check("no temporary names", all(not n.endswith(".mcp-exec-tmp") for n in names), events)
    sbx.commands.run(f"echo more >> {wdir}/new.txt")
    poll_events(h, [(FilesystemEventType.WRITE, "new.txt")])
    fs.rename(f"{wdir}/old.txt", f"{wdir}/moved.txt")
    poll_events(h, [(FilesystemEventType.RENAME, "old.txt"), (FilesystemEventType.CREATE, "moved.txt")])
    fs.remove(f"{wdir}/new.txt")
    poll_events(h, [(FilesystemEventType.REMOVE, "new.txt")])
    fs.make_dir(f"{wdir}/d")
    poll_events(h, [(FilesystemEventType.CREATE, "d")])
    h.stop()
    try:
        h.get_new_events()
        raise AssertionError("get_new_events after stop did not raise")
    except Exception as e:  # the SDK's own "already stopped"
        check("stopped", "stopped" in str(e), e)
    done("watch_dir sync")

    # watch_dir, async (WatchDir server stream).
    asyncio.run(async_watch(url, wdir))
    done("watch_dir async")

    fs.remove(work)
    check("cleanup", fs.exists(work) is False)
    done("cleanup")


async def async_watch(url, wdir):
    sbx = await AsyncSandbox.create(debug=True, sandbox_url=url)
    got = []
    seen = asyncio.Event()
    want = {(FilesystemEventType.CREATE, "async.txt"), (FilesystemEventType.REMOVE, "moved.txt")}

    def on_event(e):
        got.append(e)
        if want <= {(x.type, x.name) for x in got}:
            seen.set()

    exits = []
    h = await sbx.files.watch_dir(wdir, on_event=on_event, on_exit=exits.append)
    await sbx.files.write(f"{wdir}/async.txt", "a")
    await sbx.files.remove(f"{wdir}/moved.txt")
    try:
        await asyncio.wait_for(seen.wait(), 20)
    except asyncio.TimeoutError:
        raise AssertionError(f"async events {want} not all seen: {got}")
    check("async no temporary names", all(not e.name.endswith(".mcp-exec-tmp") for e in got), got)
    await h.stop()
    check("async exit clean", all(x is None for x in exits), exits)


def refused(name, call):
    try:
        call()
    except Exception as e:
        text = str(e)
        check(name, "outside the allowed directories" in text, text)
        return
    raise AssertionError(f"{name}: not refused")


def policy(url, inside, outside):
    sbx = Sandbox.create(debug=True, sandbox_url=url)
    fs = sbx.files
    fs.write(f"{inside}/ok.txt", "in")
    check("inside", fs.read(f"{inside}/ok.txt") == "in")
    refused("write", lambda: fs.write(f"{outside}/x.txt", "out"))
    refused("write octet-stream", lambda: fs.write(f"{outside}/x.txt", io.BytesIO(b"out")))
    refused("read", lambda: fs.read(f"{outside}/x.txt"))
    refused("list", lambda: fs.list(outside))
    refused("get_info", lambda: fs.get_info(outside))
    refused("make_dir", lambda: fs.make_dir(f"{outside}/d"))
    refused("remove", lambda: fs.remove(f"{outside}/x.txt"))
    refused("rename out", lambda: fs.rename(f"{inside}/ok.txt", f"{outside}/ok.txt"))
    refused("watch_dir", lambda: fs.watch_dir(outside))
    check("still inside", fs.read(f"{inside}/ok.txt") == "in")
    done("policy")


def bench(url, http_url, token, work, rounds):
    import httpx

    sbx = Sandbox.create(debug=True, sandbox_url=url)
    data = bytes(range(256)) * (4 * 1024 * 1024 // 256)
    sbx.files.make_dir(work)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    client = httpx.Client(base_url=http_url, headers=headers, timeout=60)
    out = {"bytes": len(data), "rounds": rounds}
    samples = {k: [] for k in ("sdk_write", "sdk_read", "files_put", "files_get")}
    for i in range(rounds):
        t = time.perf_counter()
        sbx.files.write(f"{work}/sdk.bin", data)
        samples["sdk_write"].append(time.perf_counter() - t)
        t = time.perf_counter()
        back = sbx.files.read(f"{work}/sdk.bin", format="bytes")
        samples["sdk_read"].append(time.perf_counter() - t)
        assert bytes(back) == data
        t = time.perf_counter()
        r = client.put(f"/files{work}/ours.bin", content=data)
        samples["files_put"].append(time.perf_counter() - t)
        assert r.status_code in (200, 201), r.text
        t = time.perf_counter()
        r = client.get(f"/files{work}/ours.bin")
        samples["files_get"].append(time.perf_counter() - t)
        assert r.content == data
    for k, v in samples.items():
        v.sort()
        out[k + "_p50_ms"] = round(v[len(v) // 2] * 1000, 2)
        out[k + "_min_ms"] = round(v[0] * 1000, 2)
    sbx.files.remove(work)
    print(json.dumps(out))


if __name__ == "__main__":
    if sys.argv[1] == "suite":
        suite(sys.argv[2], sys.argv[3], sys.argv[4])
    elif sys.argv[1] == "policy":
        policy(sys.argv[2], sys.argv[3], sys.argv[4])
    elif sys.argv[1] == "bench":
        bench(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], int(sys.argv[6]) if len(sys.argv) > 6 else 10)
    else:
        sys.exit(f"unknown mode {sys.argv[1]!r}")
