#!/usr/bin/env bash
# Installs what the container tests need on a Debian 12 CI machine, then checks that podman runs.
#
#   podman runc      the engine and the OCI runtime SPEC §8 asks for (crun fails here with
#                    "setrlimit … Operation not permitted")
#   busybox-static   /bin/busybox: the shell and applets of both offline images
#   tini             ships /usr/bin/tini-static, the PID 1 of the offline tini image
#   bash-static      /bin/bash-static, the bash of the offline tini image
#
# and writes /etc/containers/containers.conf exactly as SPEC §8 gives it: runtime runc and
# ulimits low enough that runc's setrlimit succeeds inside unprivileged CI sandboxes.
#
# Idempotent and non-interactive: apt runs only when a package is missing, the config file is
# rewritten only when it differs (a differing file is kept once as containers.conf.orig).
# Needs root (CI runs as root); uses sudo otherwise.
set -euo pipefail

packages=(podman runc busybox-static tini bash-static)

sudo=()
if [[ $EUID -ne 0 ]]; then
    command -v sudo >/dev/null || { echo "setup-podman: needs root (or sudo)" >&2; exit 1; }
    sudo=(sudo -n)
fi

missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null | grep -qx installed || missing+=("$p")
done
if ((${#missing[@]})); then
    echo "setup-podman: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    "${sudo[@]}" apt-get update -qq
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -qq -o Dpkg::Use-Pty=0 "${packages[@]}" </dev/null >/dev/null
fi

conf=/etc/containers/containers.conf
want='[containers]
default_ulimits = ["nofile=1024:1024", "nproc=4096:4096"]
[engine]
runtime = "runc"'
if [[ "$(cat "$conf" 2>/dev/null)" != "$want" ]]; then
    "${sudo[@]}" mkdir -p /etc/containers
    if [[ -e $conf && ! -e $conf.orig ]]; then "${sudo[@]}" cp -p "$conf" "$conf.orig"; fi
    printf '%s\n' "$want" | "${sudo[@]}" tee "$conf.tmp" >/dev/null
    "${sudo[@]}" mv "$conf.tmp" "$conf"
    echo "setup-podman: wrote $conf"
fi

# `podman info` exercises storage, the runtime lookup and the config just written.
runtime=$("${sudo[@]}" podman info --format '{{.Host.OCIRuntime.Name}}') || {
    echo "setup-podman: 'podman info' failed" >&2
    exit 1
}
if [[ $runtime != runc ]]; then
    echo "setup-podman: podman uses runtime '$runtime', expected runc" >&2
    exit 1
fi
echo "setup-podman: ok ($("${sudo[@]}" podman --version), runtime $runtime)"
