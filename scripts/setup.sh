#!/usr/bin/env bash
# Sets up a Debian 12 machine for the whole test suite; scripts/test.sh runs it first.
#
#   podman runc      the engine and the OCI runtime that works here (crun fails with
#                    "setrlimit … Operation not permitted")
#   busybox-static   /bin/busybox: the shell and applets of both offline images
#   tini             ships /usr/bin/tini-static, the PID 1 of the offline tini image
#   bash-static      /bin/bash-static, the bash of the offline tini image
#   procps           pgrep and pkill, which busybox-static lacks: the offline images carry
#                    Debian's, the bare and PID-1 targets use the host's
#   catatonit        the pause image `podman kube play` builds for a pod (tests/kube.rs)
#   python3-venv     the interop suite's virtualenv (only when python3 cannot make one)
#   curl jq          the examples of README.md and docs/ that scripts/doc-examples.sh runs
#   openssl          the test CA and certificates of the HTTPS server in tests/fileref.rs
#   openssh-server openssh-client
#                    sshd and ssh for tests/ssh.rs: mcp-exec as a stdio server over
#                    `ssh -T` (a throwaway sshd on a loopback port; no service is used)
#   iproute2         `ip`, for the network namespace tests/http/ports.rs makes (a veth
#                    pair with an address of its own; nothing leaves the namespace)
#
# and writes /etc/containers/containers.conf: runtime runc and ulimits low enough that runc's
# setrlimit succeeds inside unprivileged CI sandboxes.
# Cargo tools, for any user (cargo install, pinned): cargo-deny (deny.toml's license and ban
# checks), and cargo-fuzz when a nightly toolchain is there (libFuzzer needs nightly, which this
# kind of machine cannot fetch; without it the fuzz targets run on stable as randomized tests,
# see FUZZING.md).
# Node.js >= 20 with npm is checked, not installed: Debian 12's nodejs (18) is too old for the
# interop suite's pins. The pinned Python and npm packages are interop/run.sh's to install.
#
# Idempotent and quick: when nothing is missing it only looks (no apt-get update, no writes).
# Installs only as root; otherwise it lists what is missing and how to install it, then exits
# 1 when CI is set and 0 elsewhere (the tests that need it skip with a printed reason).
set -euo pipefail

say() { printf 'setup: %s\n' "$*" >&2; }

installed() { dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null | grep -qx installed; }

packages=()
for p in podman runc busybox-static tini bash-static procps catatonit curl jq openssl openssh-server openssh-client iproute2; do
    installed "$p" || packages+=("$p")
done
if ! command -v python3 >/dev/null 2>&1; then
    packages+=(python3 python3-venv)
elif ! python3 -c 'import ensurepip, venv' 2>/dev/null; then
    packages+=(python3-venv)
fi

conf=/etc/containers/containers.conf
want='[containers]
default_ulimits = ["nofile=1024:1024", "nproc=4096:4096"]
[engine]
runtime = "runc"'
conf_ok=true
[[ "$(cat "$conf" 2>/dev/null)" == "$want" ]] || conf_ok=false

node_major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
node_ok=true
if ((node_major < 20)) || ! command -v npm >/dev/null 2>&1; then
    node_ok=false
    say "missing: Node.js >= 20 with npm (found: $(node --version 2>/dev/null || echo none)); install it yourself: Debian 12's nodejs is 18"
fi

cargo_tool() { # crate version: installed unless that version already answers
    local have
    have=$(cargo "${1#cargo-}" --version 2>/dev/null || true)
    [[ $have == "$1 $2" ]] && return 0
    say "installing $1 $2 (cargo install; was: ${have:-none})"
    if ! cargo install --locked --quiet "$1@$2" </dev/null; then
        say "error: cargo install $1 failed"
        [[ -z "${CI:-}" ]] || exit 1
    fi
}
cargo_tool cargo-deny 0.20.2
if cargo +nightly --version >/dev/null 2>&1; then
    cargo_tool cargo-fuzz 0.13.2
else
    say "no nightly toolchain: cargo-fuzz not installed; the fuzz targets run on stable as tests"
fi

if ((${#packages[@]})) || ! $conf_ok; then
    if [[ $EUID -ne 0 ]]; then
        ((${#packages[@]} == 0)) || say "missing Debian packages: ${packages[*]} (as root: apt-get install ${packages[*]})"
        $conf_ok || say "missing: $conf with runtime runc and lowered ulimits (docs/development.md; as root: bash $0)"
        if [[ -n "${CI:-}" ]]; then
            say "error: CI needs all of this; run as root"
            exit 1
        fi
        say "not root: the tests that need these will be skipped"
        exit 0
    fi
    if ((${#packages[@]})); then
        say "installing ${packages[*]}"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive \
            apt-get install -y -qq -o Dpkg::Use-Pty=0 "${packages[@]}" </dev/null >/dev/null
    fi
    if ! $conf_ok; then
        mkdir -p /etc/containers
        if [[ -e $conf && ! -e $conf.orig ]]; then cp -p "$conf" "$conf.orig"; fi
        printf '%s\n' "$want" >"$conf.tmp"
        mv "$conf.tmp" "$conf"
        say "wrote $conf"
    fi
fi

if [[ $EUID -eq 0 ]]; then
    # `podman info` exercises storage, the runtime lookup and the config file.
    runtime=$(podman info --format '{{.Host.OCIRuntime.Name}}') || {
        say "error: 'podman info' failed"
        exit 1
    }
    if [[ $runtime != runc ]]; then
        say "error: podman uses runtime '$runtime', expected runc"
        exit 1
    fi
fi
if ! $node_ok && [[ -n "${CI:-}" ]]; then
    say "error: CI needs Node.js >= 20 with npm for the interop suite"
    exit 1
fi
if $node_ok; then say "ok"; else say "ok, but without Node.js the interop suite skips its Node clients"; fi
