"""The shipped Pod manifest, checked, and turned into a variant `podman kube play` can run.

    kube_variant.py --check deploy/kubernetes/pod.yaml
    kube_variant.py --image IMG --token-file FILE --http-port N --metrics-port N \
        [--name NAME] deploy/kubernetes/pod.yaml > variant.yaml

--check asserts what the JSON schemas cannot: the HTTP and metrics listeners, the
token from a Secret file of mode 0400, the probes on the token-free metrics port, the scrape
annotations, a read-only root with emptyDir /tmp and /workspace, the cwd policy, resource
limits, and a termination grace above the shutdown grace.

The variant (scripts/kube-variant.sh) differs from the shipped Pod only where podman 4.3 or
this machine needs it; everything else (args, env, securityContext, emptyDirs, resources) is
kept, so the test runs what a cluster runs:
  - the token Secret volume becomes a hostPath of FILE (podman 4.3 crashes on Secret volumes);
  - the image is IMG, never pulled (a locally built tag);
  - the container ports get hostPort N with hostIP 127.0.0.1, so the host reaches the pod;
  - the httpGet probes are dropped: podman runs them inside the container with curl, which
    the scratch image lacks; the test polls /healthz from the host instead;
  - the name (and instance label) is NAME, so runs do not collide;
  - every other document (the Service) is left out: podman needs none.
"""

import argparse
import copy
import sys

import yaml

GRACE_ENV = "MCP_EXEC_SHUTDOWN_GRACE"
GRACE_DEFAULT = 3  # seconds, the server's default (docs/configuration.md)


def load_pod(path):
    with open(path, encoding="utf-8") as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    pods = [d for d in docs if d.get("kind") == "Pod"]
    if len(pods) != 1:
        sys.exit(f"{path}: expected exactly one Pod, found {len(pods)}")
    return pods[0]


def the_container(pod):
    containers = pod["spec"]["containers"]
    if len(containers) != 1:
        sys.exit(f"expected one container, found {len(containers)}")
    return containers[0]


def check(pod):
    """Fails with every broken promise listed."""
    problems = []

    def expect(ok, what):
        if not ok:
            problems.append(what)

    spec = pod["spec"]
    c = the_container(pod)
    args = c.get("args", [])
    env = {e["name"]: e.get("value") for e in c.get("env", [])}
    ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
    mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
    volumes = {v["name"]: v for v in spec.get("volumes", [])}

    def arg(flag):
        return args[args.index(flag) + 1] if flag in args and args.index(flag) + 1 < len(args) else None

    expect(arg("--http") == "0.0.0.0:8080", "args: --http 0.0.0.0:8080")
    expect(arg("--metrics-listen") == "0.0.0.0:9091", "args: --metrics-listen 0.0.0.0:9091")
    expect("--no-stdio" in args, "args: --no-stdio")
    expect(ports.get("http") == 8080 and ports.get("metrics") == 9091, "ports http 8080, metrics 9091")

    token = env.get("MCP_EXEC_HTTP_TOKEN_FILE") or ""
    expect("MCP_EXEC_HTTP_TOKEN" not in env, "no inline MCP_EXEC_HTTP_TOKEN")
    tdir = token.rsplit("/", 1)[0]
    tvol = volumes.get(mounts.get(tdir, ""), {})
    secret = tvol.get("secret", {})
    expect(bool(secret.get("secretName")), f"MCP_EXEC_HTTP_TOKEN_FILE {token!r} on a Secret volume")
    expect(secret.get("defaultMode") == 0o400, "the token Secret's defaultMode is 0400")

    for kind, path in (("readinessProbe", "/healthz"), ("livenessProbe", "/livez")):
        get = c.get(kind, {}).get("httpGet", {})
        expect(
            get.get("path") == path and get.get("port") in ("metrics", 9091),
            f"{kind}: httpGet {path} on the metrics port",
        )

    ann = pod["metadata"].get("annotations", {})
    expect(ann.get("prometheus.io/scrape") == "true", "annotation prometheus.io/scrape: 'true'")
    expect(ann.get("prometheus.io/port") == "9091", "annotation prometheus.io/port: '9091'")
    expect(ann.get("prometheus.io/path") == "/metrics", "annotation prometheus.io/path: /metrics")

    expect(c.get("securityContext", {}).get("readOnlyRootFilesystem") is True, "readOnlyRootFilesystem: true")
    for path in ("/tmp", "/workspace"):
        expect("emptyDir" in volumes.get(mounts.get(path, ""), {}), f"an emptyDir volume on {path}")
    allowed = (env.get("MCP_EXEC_ALLOWED_CWDS") or "").split(":")
    default = env.get("MCP_EXEC_DEFAULT_CWD")
    expect(sorted(allowed) == ["/tmp", "/workspace"], "MCP_EXEC_ALLOWED_CWDS=/workspace:/tmp")
    expect(default in allowed, "MCP_EXEC_DEFAULT_CWD inside MCP_EXEC_ALLOWED_CWDS")

    res = c.get("resources", {})
    expect({"cpu", "memory"} <= set(res.get("limits", {})), "resource limits: cpu and memory")
    expect({"cpu", "memory"} <= set(res.get("requests", {})), "resource requests: cpu and memory")

    grace = float(env.get(GRACE_ENV) or GRACE_DEFAULT)
    expect(
        spec.get("terminationGracePeriodSeconds", 30) > grace + 2,
        f"terminationGracePeriodSeconds above {GRACE_ENV} ({grace:g} s) with room to exit",
    )
    if problems:
        sys.exit("the Pod manifest breaks docs/kubernetes.md:\n  - " + "\n  - ".join(problems))


def variant(pod, image, token_file, http_port, metrics_port, name):
    pod = copy.deepcopy(pod)
    meta = pod["metadata"]
    meta["name"] = name
    meta.setdefault("labels", {})["app.kubernetes.io/instance"] = name
    spec = pod["spec"]
    c = the_container(pod)
    c["image"] = image
    c["imagePullPolicy"] = "Never"
    host = {"http": http_port, "metrics": metrics_port}
    for p in c["ports"]:
        p["hostPort"] = host[p["name"]]
        p["hostIP"] = "127.0.0.1"
    c.pop("readinessProbe", None)
    c.pop("livenessProbe", None)
    token = next(e["value"] for e in c["env"] if e["name"] == "MCP_EXEC_HTTP_TOKEN_FILE")
    tdir, tname = token.rsplit("/", 1)
    mount = next(m for m in c["volumeMounts"] if m["mountPath"] == tdir)
    # The file itself, at the path the server reads (the Secret projected a directory).
    mount["mountPath"] = token
    for i, v in enumerate(spec["volumes"]):
        if v["name"] == mount["name"]:
            spec["volumes"][i] = {"name": v["name"], "hostPath": {"path": token_file, "type": "File"}}
    return pod


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("manifest")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--image")
    ap.add_argument("--token-file")
    ap.add_argument("--http-port", type=int)
    ap.add_argument("--metrics-port", type=int)
    ap.add_argument("--name", default="mcp-exec")
    a = ap.parse_args()
    pod = load_pod(a.manifest)
    check(pod)
    if a.check:
        return
    missing = [f for f in ("image", "token_file", "http_port", "metrics_port") if getattr(a, f) is None]
    if missing:
        ap.error("a variant needs " + ", ".join("--" + m.replace("_", "-") for m in missing))
    out = variant(pod, a.image, a.token_file, a.http_port, a.metrics_port, a.name)
    yaml.safe_dump(out, sys.stdout, sort_keys=False)


if __name__ == "__main__":
    main()
