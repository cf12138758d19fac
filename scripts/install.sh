#!/usr/bin/env bash
# Builds the static mcp-exec binary from this clone and installs it as PREFIX/bin/mcp-exec:
#
#   bash scripts/install.sh            # PREFIX: /usr/local as root, else ~/.local
#   bash scripts/install.sh /opt/mcp   # any PREFIX
#
# The binary is static (glibc with crt-static, x86_64-unknown-linux-gnu): it runs on any
# x86_64 Linux, and it is the one the container images and BENCHMARKS.md use. A cold build
# takes a few minutes; CARGO_TARGET_DIR is honoured, so a build already made is reused.
# It says where the binary went, and what to add to PATH when PREFIX/bin is not on it.
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ $# -gt 1 || ${1:-} == -* ]]; then
    echo "usage: bash scripts/install.sh [PREFIX]" >&2
    exit 2
fi
if [[ -n ${1:-} ]]; then
    prefix=$1
elif [[ $(id -u) -eq 0 ]]; then
    prefix=/usr/local
else
    prefix=$HOME/.local
fi

target=x86_64-unknown-linux-gnu
if [[ $(uname -s) != Linux || $(uname -m) != x86_64 ]]; then
    echo "install: the static build is for x86_64 Linux; this is $(uname -s) $(uname -m)" >&2
    exit 1
fi
echo "install: building the static binary (cargo build --release --target $target)" >&2
RUSTFLAGS='-C target-feature=+crt-static -C relocation-model=static' \
    cargo build --release --locked --target "$target" -p mcp-exec
built=${CARGO_TARGET_DIR:-target}/$target/release/mcp-exec

mkdir -p "$prefix/bin"
install -m 0755 "$built" "$prefix/bin/mcp-exec"
echo "install: $("$prefix/bin/mcp-exec" --version) is $prefix/bin/mcp-exec" >&2
case ":$PATH:" in
*":$prefix/bin:"*) ;;
*) echo "install: $prefix/bin is not on PATH: export PATH=\"$prefix/bin:\$PATH\"" >&2 ;;
esac
