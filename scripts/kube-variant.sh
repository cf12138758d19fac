#!/usr/bin/env bash
# Writes to stdout the variant of deploy/kubernetes/pod.yaml that `podman kube play` runs on one
# machine (docs/kubernetes.md); scripts/kube_variant.py says what differs and why. Arguments
# are passed on, e.g.
#   scripts/kube-variant.sh --image localhost/mcp-exec:scratch --token-file /path/token \
#       --http-port 18080 --metrics-port 19091 --name mcp-exec-test > variant.yaml
#   podman kube play variant.yaml ... podman kube down variant.yaml
# Uses deploy/.venv (scripts/k8s-venv.sh installs PyYAML there from the pins).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/k8s-venv.sh
source "$repo/scripts/k8s-venv.sh"
k8s_venv >&2
exec "$k8s_python" "$repo/scripts/kube_variant.py" "$@" "$repo/deploy/kubernetes/pod.yaml"
