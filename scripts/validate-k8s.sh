#!/usr/bin/env bash
# Validates every manifest in deploy/kubernetes/ offline against the Kubernetes JSON schemas,
# strictly (an unknown or misspelt field is an error), with the pinned
# kubernetes-validate from deploy/requirements.txt (scripts/k8s-venv.sh installs it), for
# the Kubernetes version it defaults to unless K8S_VERSION is set. No cluster needed.
# Exits non-zero when a manifest fails or when the validator cannot be installed: this is a
# gate, so a missing tool fails rather than skips, in CI and elsewhere.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/k8s-venv.sh
source scripts/k8s-venv.sh
k8s_venv

shopt -s nullglob
manifests=(deploy/kubernetes/*.yaml)
((${#manifests[@]})) || { echo "validate-k8s: no manifests in deploy/kubernetes/" >&2; exit 1; }
version=()
[[ -z ${K8S_VERSION:-} ]] || version=(--kubernetes-version "$K8S_VERSION")
"$(dirname "$k8s_python")/kubernetes-validate" --strict --no-warn "${version[@]}" "${manifests[@]}"
# The promises the schemas cannot check (docs/kubernetes.md): probes, token, scrape, grace.
"$k8s_python" scripts/kube_variant.py --check deploy/kubernetes/pod.yaml
# deploy/kubernetes/agent-sandbox/: against agent-sandbox's vendored CRD schemas.
"$k8s_python" scripts/validate_agent_sandbox.py
echo "validate-k8s: ${#manifests[@]} manifests valid, and deploy/kubernetes/agent-sandbox/"
