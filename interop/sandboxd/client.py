"""Clients of mcp-exec's sandboxd gRPC front-end (`--sandboxd-grpc`, docs/sandboxd.md),
run from interop/sandboxd/.venv by tests/sandboxd.rs and bench/sandboxd.sh.

Each mode prints one JSON line with what it saw; the Rust tests assert on it
(and check the processes themselves). Modes:

  sdk GRPC REST CMD [ENV_JSON] [CWD]   the official SDK's commands.run ({"error": …} when it
                                       raises: the status the server answered)
  sdk-timeout GRPC REST CMD SECONDS    commands.run with command_timeout
  execute GRPC ARGV_JSON               grpcio Execute: exit code, output sizes, trailers
  start GRPC ARGV_JSON                 grpcio Start: the events in order, trailers
  stdin GRPC                           Start `cat`, WriteStdin bytes then EOF
  signal GRPC ARGV_JSON                Start, wait for its first output, SendSignal TERM
  resize GRPC                          Start{pty 80x24} `stty size`, ResizeTTY 100x30
  hold GRPC ARGV_JSON                  Start, print the init and first output events, wait
                                       for a line on stdin, then cancel the call (a client
                                       that goes away)
  unknown GRPC                         SendSignal / WriteStdin / ResizeTTY on unknown ids,
                                       ResizeTTY on a pipe job
  auth GRPC TOKEN                      Execute `true` without metadata, then with
                                       `authorization: Bearer TOKEN`
  bench GRPC HTTP N                    p50 of Execute `true` and of POST /exec `true`

The SDK is driven as the note's recipe says (notes/platform-protocols.md §1.3):
its `Sandbox` with `SandboxdInClusterConnectionConfig(mode="in-cluster-pod-ip")`
and a stand-in K8sHelper whose pod IP is 127.0.0.1; the REST port is only
configuration here (the SDK wants one distinct from the gRPC port).
"""

import http.client
import json
import statistics
import sys
import time

import grpc
from k8s_agent_sandbox.commands._process_stubs import process_pb2 as pb
from k8s_agent_sandbox.commands._process_stubs import process_pb2_grpc as pb_grpc

TIMEOUT = 60


class LocalHelper:
    """Stands in for K8sHelper: the sandbox's pod IP is loopback."""

    injected_api_client = None

    def get_sandbox(self, name, namespace):
        return {"status": {"podIPs": ["127.0.0.1"]}}


def sandbox(grpc_port, rest_port):
    from k8s_agent_sandbox import SandboxdInClusterConnectionConfig
    from k8s_agent_sandbox.sandbox import Sandbox

    return Sandbox(
        claim_name=None,
        sandbox_id="local",
        namespace="default",
        connection_config=SandboxdInClusterConnectionConfig(
            mode="in-cluster-pod-ip", rest_port=int(rest_port), grpc_port=int(grpc_port)
        ),
        k8s_helper=LocalHelper(),
    )


def stub(port):
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    grpc.channel_ready_future(channel).result(timeout=TIMEOUT)
    return pb_grpc.ProcessServiceStub(channel)


def trailers(call):
    return {k: v for k, v in (call.trailing_metadata() or ())}


def config(argv):
    return pb.ProcessConfig(command=argv)


def event_json(ev):
    kind = ev.WhichOneof("event")
    if kind == "init":
        return {"init": ev.init.process_id}
    if kind == "exit":
        return {"exit": ev.exit.exit_code}
    return {kind: getattr(ev, kind).decode("utf-8", "replace")}


def main():
    mode, port = sys.argv[1], sys.argv[2]
    rest = sys.argv[3:]
    if mode == "sdk":
        cmd = rest[1]
        env = json.loads(rest[2]) if len(rest) > 2 else None
        cwd = rest[3] if len(rest) > 3 else None
        try:
            r = sandbox(port, rest[0]).commands.run(cmd, env=env, cwd=cwd)
            out = {"stdout": r.stdout, "stderr": r.stderr, "exit_code": r.exit_code}
        except RuntimeError as e:
            out = {"error": str(e)}
    elif mode == "sdk-timeout":
        start = time.monotonic()
        r = sandbox(port, rest[0]).commands.run(rest[1], command_timeout=float(rest[2]))
        out = {
            "exit_code": r.exit_code,
            "timed_out": getattr(r, "timed_out", None),
            "stderr": r.stderr,
            "seconds": time.monotonic() - start,
        }
    elif mode == "execute":
        s = stub(port)
        r, call = s.Execute.with_call(
            pb.ExecuteRequest(config=config(json.loads(rest[0]))), timeout=TIMEOUT
        )
        out = {
            "exit_code": r.exit_code,
            "stdout_len": len(r.stdout),
            "stderr_len": len(r.stderr),
            "stdout_head": r.stdout[:200].decode("utf-8", "replace"),
            "trailers": trailers(call),
        }
    elif mode == "start":
        s = stub(port)
        call = s.Start(pb.StartRequest(config=config(json.loads(rest[0]))), timeout=TIMEOUT)
        events = [event_json(e) for e in call]
        out = {"events": events, "trailers": trailers(call), "code": call.code().name}
    elif mode == "stdin":
        s = stub(port)
        call = s.Start(pb.StartRequest(config=config(["cat"])), timeout=TIMEOUT)
        first = event_json(next(call))
        pid = first["init"]
        s.WriteStdin(pb.WriteStdinRequest(process_id=pid, input=b"hello "), timeout=TIMEOUT)
        s.WriteStdin(pb.WriteStdinRequest(process_id=pid, input=b"world\n"), timeout=TIMEOUT)
        from google.protobuf import empty_pb2

        s.WriteStdin(pb.WriteStdinRequest(process_id=pid, eof=empty_pb2.Empty()), timeout=TIMEOUT)
        events = [first] + [event_json(e) for e in call]
        out = {"events": events, "code": call.code().name}
    elif mode == "signal":
        s = stub(port)
        call = s.Start(pb.StartRequest(config=config(json.loads(rest[0]))), timeout=TIMEOUT)
        events = [event_json(next(call))]
        events.append(event_json(next(call)))  # its first output: it runs
        s.SendSignal(
            pb.SendSignalRequest(process_id=events[0]["init"], signal=pb.SIGNAL_SIGTERM),
            timeout=TIMEOUT,
        )
        events += [event_json(e) for e in call]
        out = {"events": events, "trailers": trailers(call), "code": call.code().name}
    elif mode == "resize":
        s = stub(port)
        argv = ["sh", "-c", "stty size; read x; stty size"]
        call = s.Start(
            pb.StartRequest(config=config(argv), pty=pb.PTY(cols=80, rows=24)), timeout=TIMEOUT
        )
        pid = event_json(next(call))["init"]
        seen = ""
        for e in call:
            j = event_json(e)
            seen += j.get("stdout", "")
            if "24 80" in seen:
                break
        s.ResizeTTY(pb.ResizeTTYRequest(process_id=pid, cols=100, rows=30), timeout=TIMEOUT)
        s.WriteStdin(pb.WriteStdinRequest(process_id=pid, input=b"\n"), timeout=TIMEOUT)
        exit_code = None
        for e in call:
            j = event_json(e)
            seen += j.get("stdout", "")
            if "exit" in j:
                exit_code = j["exit"]
        out = {"output": seen, "exit": exit_code}
    elif mode == "hold":
        s = stub(port)
        call = s.Start(pb.StartRequest(config=config(json.loads(rest[0]))), timeout=TIMEOUT)
        events = [event_json(next(call)), event_json(next(call))]
        print(json.dumps({"events": events}), flush=True)
        sys.stdin.readline()
        call.cancel()
        out = {"cancelled": True}
    elif mode == "unknown":
        s = stub(port)
        codes = {}
        for name, fn in [
            ("signal", lambda: s.SendSignal(
                pb.SendSignalRequest(process_id=999999, signal=pb.SIGNAL_SIGTERM), timeout=TIMEOUT)),
            ("stdin", lambda: s.WriteStdin(
                pb.WriteStdinRequest(process_id=999999, input=b"x"), timeout=TIMEOUT)),
            ("resize", lambda: s.ResizeTTY(
                pb.ResizeTTYRequest(process_id=999999, cols=10, rows=10), timeout=TIMEOUT)),
        ]:
            try:
                fn()
                codes[name] = "OK"
            except grpc.RpcError as e:
                codes[name] = e.code().name
        call = s.Start(pb.StartRequest(config=config(["sleep", "30"])), timeout=TIMEOUT)
        pid = event_json(next(call))["init"]
        try:
            s.ResizeTTY(pb.ResizeTTYRequest(process_id=pid, cols=10, rows=10), timeout=TIMEOUT)
            codes["resize_pipe"] = "OK"
        except grpc.RpcError as e:
            codes["resize_pipe"] = e.code().name
            codes["resize_pipe_message"] = e.details()
        s.SendSignal(pb.SendSignalRequest(process_id=pid, signal=pb.SIGNAL_SIGKILL), timeout=TIMEOUT)
        codes["killed_exit"] = [event_json(e) for e in call][-1]
        out = codes
    elif mode == "auth":
        s = stub(port)
        req = pb.ExecuteRequest(config=config(["true"]))
        out = {}
        for name, metadata in [("none", ()), ("bearer", (("authorization", f"Bearer {rest[0]}"),)),
                               ("wrong", (("authorization", "Bearer guess"),))]:
            try:
                r = s.Execute(req, timeout=TIMEOUT, metadata=metadata)
                out[name] = {"code": "OK", "exit_code": r.exit_code}
            except grpc.RpcError as e:
                out[name] = {"code": e.code().name, "details": e.details()}
    elif mode == "bench":
        http_port, n = int(rest[0]), int(rest[1])
        s = stub(port)
        req = pb.ExecuteRequest(config=config(["true"]))
        grpc_ms = []
        for _ in range(n):
            t = time.perf_counter()
            s.Execute(req, timeout=TIMEOUT)
            grpc_ms.append((time.perf_counter() - t) * 1000)
        exec_ms = []
        conn = http.client.HTTPConnection("127.0.0.1", http_port, timeout=TIMEOUT)
        for _ in range(n):
            t = time.perf_counter()
            conn.request("POST", "/exec", body=json.dumps({"argv": ["true"]}),
                         headers={"Accept": "text/event-stream",
                                  "Content-Type": "application/json"})
            body = conn.getresponse().read()
            exec_ms.append((time.perf_counter() - t) * 1000)
            assert b"event: exit" in body, body
        out = {
            "n": n,
            "grpc_execute_p50_ms": statistics.median(grpc_ms),
            "post_exec_p50_ms": statistics.median(exec_ms),
            "ratio": statistics.median(grpc_ms) / statistics.median(exec_ms),
        }
    else:
        raise SystemExit(f"unknown mode {mode}")
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
