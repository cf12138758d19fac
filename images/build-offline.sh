#!/usr/bin/env bash
# Builds both images without a container registry, from the same Containerfiles a registry
# user builds:
#
#   scripts/setup.sh             # once per machine (scripts/test.sh runs it): podman, runc,
#                                # busybox-static, tini, bash-static, procps, containers.conf
#   images/build-offline.sh      # -> localhost/mcp-exec:scratch and localhost/mcp-exec:tini
#   images/build-offline.sh --check   # only checks the prerequisites: exit 0 when all are there
#
# What replaces the registry:
#   - the binary: `cargo build --release` for x86_64-unknown-linux-gnu with crt-static (cargo
#     makes this a no-op when nothing changed), or the file named by MCP_EXEC_BINARY. It is
#     handed to both Containerfiles as `--build-context build=DIR` (DIR/out/mcp-exec), which
#     podman uses instead of running their `build` stage.
#   - the base images: one local image, localhost/mcp-exec-offline-base:<content hash>, made
#     with `podman import` from files of Debian packages installed on this machine: busybox-static
#     (/bin/busybox and its applets, images/shims for applets it lacks), procps' pgrep and pkill
#     (/usr/bin; busybox-static has no such applets) with the shared libraries `ldd` resolves
#     for them and the dynamic loader, at the paths ldd names, tini's static binary
#     (/sbin/tini), bash-static (/bin/bash), and images/rootfs/etc. It stands in for
#     busybox:musl (BUSYBOX_IMAGE) and alpine (ALPINE_IMAGE, with APK_PACKAGES empty).
#
# Caching never matters for correctness: the base image is reused only when its content hash
# matches, and podman's layer cache keys on content. Runs as root without a terminal; nothing
# is fetched from the network. Ends with a smoke run of each image (stdin closed: it must exit
# 0 promptly) and prints the sizes.
#
# Environment:
#   MCP_EXEC_BINARY   prebuilt static mcp-exec to package instead of building with cargo
#   MCP_EXEC_SMOKE    0 skips the smoke runs (default 1)
#   CARGO_TARGET_DIR  honoured when locating the cargo-built binary
#   MCP_EXEC_TEST_IMAGE_SCRATCH, MCP_EXEC_TEST_IMAGE_TINI
#                     tags to build instead of localhost/mcp-exec:scratch|tini (the test
#                     harness reads the same variables, so a private copy is built and tested)
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"

target=x86_64-unknown-linux-gnu
base_repo=localhost/mcp-exec-offline-base
scratch_tag=${MCP_EXEC_TEST_IMAGE_SCRATCH:-localhost/mcp-exec:scratch}
tini_tag=${MCP_EXEC_TEST_IMAGE_TINI:-localhost/mcp-exec:tini}
path_env=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

say() { printf 'build-offline: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

# --- prerequisites ----------------------------------------------------------------------------
command -v podman >/dev/null || die "podman not found; run scripts/setup.sh as root"
for pkg in busybox-static tini bash-static procps; do
    dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null | grep -qx installed \
        || die "Debian package $pkg is not installed; run scripts/setup.sh as root"
done
busybox=/bin/busybox          # busybox-static (the dynamic `busybox` package conflicts with it)
tini=/usr/bin/tini-static
bash_static=/bin/bash-static
pgrep=/usr/bin/pgrep          # procps; /usr/bin/pkill is a symlink to it
for f in "$busybox" "$tini" "$bash_static" "$pgrep"; do [[ -x $f ]] || die "$f missing"; done
[[ ${1:-} == --check ]] && exit 0

# --- the binary ------------------------------------------------------------------------------
if [[ -n ${MCP_EXEC_BINARY:-} ]]; then
    binary=$MCP_EXEC_BINARY
    [[ -f $binary && -x $binary ]] || die "MCP_EXEC_BINARY=$binary is not an executable file"
    say "packaging $binary"
else
    command -v cargo >/dev/null || die "cargo not found (or set MCP_EXEC_BINARY)"
    say "cargo build --release --target $target (crt-static)"
    RUSTFLAGS='-C target-feature=+crt-static -C relocation-model=static' cargo build --release --target "$target"
    binary=${CARGO_TARGET_DIR:-target}/$target/release/mcp-exec
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/mcp-exec-images.XXXXXX")
trap 'rm -rf "$work"' EXIT

mkdir -p "$work/build/out"
cp "$binary" "$work/build/out/mcp-exec"
chmod 0755 "$work/build/out/mcp-exec"

# --- the local base image --------------------------------------------------------------------
root=$work/base
mkdir -p "$root"/{bin,sbin,etc,root,tmp,usr/bin,usr/local/bin}
cp "$busybox" "$root/bin/busybox"
for applet in $("$busybox" --list); do
    [[ $applet == busybox ]] || ln -s busybox "$root/bin/$applet"
done
for shim in images/shims/*; do
    [[ -e $root/bin/${shim##*/} ]] || install -m 0755 "$shim" "$root/bin/${shim##*/}"
done
# pgrep decides by its name whether to be pkill. Its libraries are copied to the paths ldd
# resolves (the loader to the PT_INTERP path it names), where the loader's default search finds
# them without an ld.so.cache.
install -m 0755 "$pgrep" "$root/usr/bin/pgrep"
ln -s pgrep "$root/usr/bin/pkill"
ldd_out=$(ldd "$pgrep")
! grep -q 'not found' <<<"$ldd_out" || die "ldd $pgrep: $ldd_out"
for lib in $(awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' <<<"$ldd_out"); do
    mkdir -p "$root${lib%/*}"
    cp -L "$lib" "$root$lib"
done
install -m 0755 "$bash_static" "$root/bin/bash"
install -m 0755 "$tini" "$root/sbin/tini"
install -m 0644 images/rootfs/etc/passwd images/rootfs/etc/group "$root/etc/"
ln -s /bin/busybox "$root/usr/bin/env"
chmod 0700 "$root/root"
chmod 1777 "$root/tmp"

# A reproducible tar, so that its hash names the content and a rebuild is skipped when equal.
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$root" -cf "$work/base.tar" .
base=$base_repo:$(sha256sum "$work/base.tar" | cut -c1-16)
if podman image exists "$base"; then
    say "base image $base (cached)"
else
    say "importing base image $base"
    podman import --quiet \
        --change "ENV PATH=$path_env" \
        --change 'CMD ["/bin/sh"]' \
        "$work/base.tar" "$base" >/dev/null
fi

# --- the images, from the Containerfiles a registry user builds ------------------------------
common=(--pull=never --layers --build-context "build=$work/build")

say "building $scratch_tag"
podman build "${common[@]}" -f Containerfile.scratch \
    --build-arg "BUSYBOX_IMAGE=$base" \
    -t "$scratch_tag" . </dev/null

say "building $tini_tag"
podman build "${common[@]}" -f Containerfile \
    --build-arg "ALPINE_IMAGE=$base" \
    --build-arg APK_PACKAGES= \
    -t "$tini_tag" . </dev/null

# --- smoke runs --------------------------------------------------------------------------------
if [[ ${MCP_EXEC_SMOKE:-1} != 0 ]]; then
    for image in "$scratch_tag" "$tini_tag"; do
        rc=0
        timeout 60 podman run -i --rm "$image" </dev/null >"$work/smoke.out" 2>&1 || rc=$?
        if [[ $rc -ne 0 ]]; then
            cat "$work/smoke.out" >&2
            die "$image: 'podman run -i --rm' with stdin closed exited $rc (expected 0)"
        fi
    done
    podman run --rm --entrypoint /bin/sh "$scratch_tag" \
        -c 'echo ok | cat >/tmp/probe && ps >/dev/null && rm /tmp/probe' </dev/null \
        || die "$scratch_tag: /bin/sh with cat, ps and a writable /tmp does not work"
    # pgrep runs (its libraries resolve) and reads /proc: the shell is PID 1 here.
    for image in "$scratch_tag" "$tini_tag"; do
        podman run --rm --entrypoint /bin/sh "$image" -c '[ "$(pgrep -x sh)" = 1 ]' </dev/null \
            || die "$image: pgrep -x sh does not find the shell (PID 1)"
    done
    say "smoke runs passed"
fi

# --- sizes ------------------------------------------------------------------------------------
human() { numfmt --to=iec-i --suffix=B --format='%.1f' "$1"; }
bin_bytes=$(stat -c %s "$work/build/out/mcp-exec")
printf '%-28s %12s  %s\n' "artifact" "bytes" "size"
printf '%-28s %12s  %s\n' "mcp-exec binary" "$bin_bytes" "$(human "$bin_bytes")"
for image in "$scratch_tag" "$tini_tag"; do
    bytes=$(podman image inspect --format '{{.Size}}' "$image")
    printf '%-28s %12s  %s\n' "$image" "$bytes" "$(human "$bytes")"
done
