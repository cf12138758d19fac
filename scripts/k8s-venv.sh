# Sourced by scripts/validate-k8s.sh and scripts/kube-variant.sh: makes sure deploy/.venv holds
# the packages pinned in deploy/requirements.txt (kubernetes-validate, which bundles the
# Kubernetes JSON schemas, and PyYAML), and sets $k8s_python to its interpreter.
# Reinstalled only when the pin file changes (a stamp holds its hash); the first install needs
# PyPI, later runs nothing from the network. Under a lock: the two tests of tests/kube.rs run
# both scripts at once, and two installs into one venv would break each other.
# Fails (returns 1) with the reason on stderr.
k8s_venv() {
    local deploy
    deploy=$(cd "$(dirname "${BASH_SOURCE[0]}")/../deploy" && pwd)
    k8s_python=$deploy/.venv/bin/python
    (
        flock 9
        if [[ -f $deploy/.venv/.requirements.sha256 ]] &&
            [[ "$(sha256sum <"$deploy/requirements.txt")" == "$(cat "$deploy/.venv/.requirements.sha256")" ]]; then
            exit 0
        fi
        command -v python3 >/dev/null 2>&1 || { echo "k8s-venv: python3 not found" >&2; exit 1; }
        rm -rf "$deploy/.venv"
        python3 -m venv "$deploy/.venv" ||
            { echo "k8s-venv: python3 -m venv failed (Debian: apt-get install python3-venv)" >&2; exit 1; }
        "$deploy/.venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input \
            -r "$deploy/requirements.txt" </dev/null ||
            { echo "k8s-venv: pip install -r deploy/requirements.txt failed" >&2; exit 1; }
        sha256sum <"$deploy/requirements.txt" >"$deploy/.venv/.requirements.sha256"
    ) 9>"$deploy/.venv.lock"
}
