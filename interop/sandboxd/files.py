"""The agent-sandbox Python SDK's files.* against mcp-exec's sandboxd REST API.

Run by tests/sandboxd_rest.rs: `files.py REST_PORT GRPC_PORT`. Builds the SDK's
`Sandbox` exactly as it is built in a cluster with the in-cluster pod-IP
connection config (the helper that would ask the API server for the pod IP
answers 127.0.0.1; platform-protocols note §1.3), then drives
files.write/read/list/exists/delete and checks every value. Prints `ok` and
exits 0, or raises. files.* use only REST; the SDK's gRPC channel is lazy and
never connects here.
"""

import sys

from k8s_agent_sandbox import SandboxdInClusterConnectionConfig
from k8s_agent_sandbox.exceptions import SandboxRequestError
from k8s_agent_sandbox.sandbox import Sandbox  # internal module, not re-exported


class LocalHelper:
    """Stands in for K8sHelper: the pod IP is loopback."""

    injected_api_client = None

    def get_sandbox(self, name, namespace):
        return {"status": {"podIPs": ["127.0.0.1"]}}


def main():
    rest_port, grpc_port = int(sys.argv[1]), int(sys.argv[2])
    sb = Sandbox(
        claim_name=None,
        sandbox_id="local",
        namespace="default",
        connection_config=SandboxdInClusterConnectionConfig(
            mode="in-cluster-pod-ip", rest_port=rest_port, grpc_port=grpc_port
        ),
        k8s_helper=LocalHelper(),
    )
    f = sb.files

    # write: bytes and str, a nested path (parents created), a name with a space.
    f.write("dir/a b.txt", b"hello\n")
    f.write("dir/sub/c.txt", "text \u00e9\n")
    binary = bytes(range(256)) * 64
    f.write("bin.dat", binary)
    # Idempotent: the same write again (the SDK retries PUTs).
    f.write("bin.dat", binary)

    # read
    assert f.read("dir/a b.txt") == b"hello\n", f.read("dir/a b.txt")
    assert f.read("dir/sub/c.txt") == "text \u00e9\n".encode(), f.read("dir/sub/c.txt")
    assert f.read("bin.dat") == binary

    # list: names, types, sizes; modified_at parsed by the SDK
    entries = {e.name: e for e in f.list("dir")}
    assert set(entries) == {"a b.txt", "sub"}, entries
    assert entries["a b.txt"].type == "file" and entries["a b.txt"].size == 6, entries
    assert entries["sub"].type == "directory", entries
    top = {e.name for e in f.list("")}
    assert {"dir", "bin.dat"} <= top, top

    # exists
    assert f.exists("dir/a b.txt") is True
    assert f.exists("dir") is True
    assert f.exists("nope.txt") is False

    # delete: a file; a non-empty directory only recursively
    f.delete("dir/a b.txt")
    assert f.exists("dir/a b.txt") is False
    try:
        f.delete("dir")
    except SandboxRequestError as e:  # the SDK raises on 409
        assert e.status_code == 409, (e.status_code, e)
        assert e.response.json()["code"] == "CONFLICT", e.response.text
    else:
        raise AssertionError("deleting a non-empty directory without recursive succeeded")
    assert f.exists("dir") is True
    f.delete("dir", recursive=True)
    assert f.exists("dir") is False

    # Traversal is refused by the SDK itself before any request (write/read).
    for bad in ["../escape.txt"]:
        try:
            f.write(bad, b"x")
        except Exception:
            pass
        else:
            raise AssertionError(f"writing {bad!r} succeeded")

    sb.close_connection()
    print("ok")


if __name__ == "__main__":
    main()
