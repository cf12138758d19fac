#!/usr/bin/env python3
"""Validates deploy/kubernetes/agent-sandbox/*.yaml offline.

- A custom resource (Sandbox, SandboxTemplate) is checked against the openAPIV3Schema of its
  CustomResourceDefinition, vendored in deploy/kubernetes/agent-sandbox/crds/ (see ORIGIN there),
  strictly: a field the schema does not define is an error (the API server would prune it
  silently), unless the schema says x-kubernetes-preserve-unknown-fields.
- Its embedded pod template is then checked as a Pod by kubernetes-validate --strict (the CRD
  carries only a structural copy of the PodSpec schema).
- Any other manifest (the NetworkPolicy) goes to kubernetes-validate --strict directly.

Prints one `<file>: passed` line per manifest; exits 1 on the first failure. Run with the
deploy/.venv interpreter (jsonschema and PyYAML come with kubernetes-validate).

    validate_agent_sandbox.py --variant --image IMG --token-file FILE --name NAME \
        --port sandboxd-rest=N [--port metrics=N ...] > pod.yaml

writes the Pod that sandbox.yaml's controller would create, as the variant `podman kube play`
runs (what differs and why: scripts/kube_variant.py's doc; a container port without --port
gets no hostPort).
"""

import copy
import glob
import os
import subprocess
import sys
import tempfile

import jsonschema
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
DIR = os.path.join(HERE, "..", "deploy", "kubernetes", "agent-sandbox")
VALIDATE = os.path.join(os.path.dirname(sys.executable), "kubernetes-validate")


def strict(schema):
    """The schema with additionalProperties: false wherever properties are listed and unknown
    fields are not preserved."""
    s = copy.deepcopy(schema)

    def walk(node):
        if isinstance(node, dict):
            if (
                "properties" in node
                and "additionalProperties" not in node
                and not node.get("x-kubernetes-preserve-unknown-fields")
            ):
                node["additionalProperties"] = False
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(s)
    return s


def crd_schemas():
    out = {}
    for path in glob.glob(os.path.join(DIR, "crds", "*.yaml")):
        with open(path) as f:
            crd = yaml.safe_load(f)
        group = crd["spec"]["group"]
        kind = crd["spec"]["names"]["kind"]
        for v in crd["spec"]["versions"]:
            if v.get("served"):
                out[(f"{group}/{v['name']}", kind)] = strict(v["schema"]["openAPIV3Schema"])
    return out


def kubernetes_validate(doc, shown):
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        yaml.safe_dump(doc, f)
        name = f.name
    try:
        r = subprocess.run(
            [VALIDATE, "--strict", "--no-warn", name], capture_output=True, text=True
        )
    finally:
        os.unlink(name)
    if r.returncode != 0:
        sys.exit(f"{shown}: {r.stdout}{r.stderr}")


def variant(argv):
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("--variant", action="store_true")
    ap.add_argument("--image", required=True)
    ap.add_argument("--token-file", required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--port", action="append", default=[])
    a = ap.parse_args(argv)
    with open(os.path.join(DIR, "sandbox.yaml")) as f:
        sandbox = yaml.safe_load(f)
    template = copy.deepcopy(sandbox["spec"]["podTemplate"])
    meta = dict(template.get("metadata", {}), name=a.name)
    meta.setdefault("labels", {})["app.kubernetes.io/instance"] = a.name
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": template["spec"]}
    hosts = dict(p.split("=", 1) for p in a.port)
    (c,) = pod["spec"]["containers"]
    c["image"] = a.image
    c["imagePullPolicy"] = "Never"
    for p in c["ports"]:
        if p["name"] in hosts:
            p["hostPort"] = int(hosts[p["name"]])
            p["hostIP"] = "127.0.0.1"
    c.pop("readinessProbe", None)
    c.pop("livenessProbe", None)
    token = next(e["value"] for e in c["env"] if e["name"] == "MCP_EXEC_HTTP_TOKEN_FILE")
    tdir = token.rsplit("/", 1)[0]
    mount = next(m for m in c["volumeMounts"] if m["mountPath"] == tdir)
    mount["mountPath"] = token
    for i, v in enumerate(pod["spec"]["volumes"]):
        if v["name"] == mount["name"]:
            pod["spec"]["volumes"][i] = {
                "name": v["name"],
                "hostPath": {"path": a.token_file, "type": "File"},
            }
    yaml.safe_dump(pod, sys.stdout, sort_keys=False)


def main():
    if "--variant" in sys.argv:
        return variant(sys.argv[1:])
    schemas = crd_schemas()
    manifests = sorted(glob.glob(os.path.join(DIR, "*.yaml")))
    if not manifests:
        sys.exit("validate-agent-sandbox: no manifests")
    for path in manifests:
        shown = os.path.relpath(path, os.path.join(HERE, ".."))
        with open(path) as f:
            doc = yaml.safe_load(f)
        key = (doc.get("apiVersion"), doc.get("kind"))
        if key in schemas:
            try:
                jsonschema.validate(doc, schemas[key])
            except jsonschema.ValidationError as e:
                sys.exit(f"{shown}: {'.'.join(map(str, e.absolute_path))}: {e.message}")
            template = doc["spec"]["podTemplate"]
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": dict(template.get("metadata", {}), name=doc["metadata"]["name"]),
                "spec": template["spec"],
            }
            kubernetes_validate(pod, f"{shown} (its pod template as a Pod)")
        else:
            kubernetes_validate(doc, shown)
        print(f"{shown}: passed")


if __name__ == "__main__":
    main()
