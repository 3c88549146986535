#!/usr/bin/env bash
# Build the docker sandbox image locally: no image registry is reachable, so the root filesystem is
# bootstrapped from Debian's package mirror (the one apt already uses) and imported with `docker import`.
#
#   sandboxes/image/build.sh            build unless an image from this exact recipe exists
#   sandboxes/image/build.sh --force    rebuild anyway
#
# The image is tagged rlgym-sandbox:py3 (the docker backend's default) and rlgym-sandbox:<recipe hash>,
# and carries the hash in the label rlgym_llm.recipe, so editing this recipe triggers a rebuild.
# Environment: RLGYM_SANDBOX_IMAGE (default rlgym-sandbox:py3), DEBIAN_MIRROR (default: apt's mirror).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
IMAGE="${RLGYM_SANDBOX_IMAGE:-rlgym-sandbox:py3}"
REPO="${IMAGE%%:*}"
SUITE=bookworm
PACKAGES=python3-minimal,python3  # python3: the full standard library (unittest, json) that test suites need
# Everything that shapes the image goes into the hash: this script and the in-box files beside it.
RECIPE_HASH="$(cd "$HERE" && find . -type f | LC_ALL=C sort | xargs cat | sha256sum | cut -c1-16)"

force=0
[[ "${1:-}" == "--force" ]] && force=1

current="$(docker image inspect --format '{{ index .Config.Labels "rlgym_llm.recipe" }}' "$IMAGE" 2>/dev/null || true)"
if [[ $force == 0 && "$current" == "$RECIPE_HASH" ]]; then
    echo "build.sh: $IMAGE is up to date (recipe $RECIPE_HASH)"
    exit 0
fi

mirror="${DEBIAN_MIRROR:-}"
if [[ -z "$mirror" ]]; then
    # First plain Debian archive URI that apt is configured with (deb822 or one-line format).
    mirror="$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null \
        | grep -oE 'https?://[^ ]+/debian/?( |$)' | grep -v security | head -n1 | tr -d ' ' || true)"
fi
mirror="${mirror:-http://deb.debian.org/debian}"

command -v debootstrap >/dev/null || { echo "build.sh: debootstrap is missing (apt-get install debootstrap)" >&2; exit 1; }

rootfs="$(mktemp -d /tmp/rlgym-sandbox-rootfs.XXXXXX)"
trap 'rm -rf "$rootfs"' EXIT

echo "build.sh: bootstrapping $SUITE + $PACKAGES from $mirror"
debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$rootfs" "$mirror" >"$rootfs.log" 2>&1 \
    || { tail -n 30 "$rootfs.log" >&2; rm -f "$rootfs.log"; exit 1; }
rm -f "$rootfs.log"

# Slim the tree: package caches, docs and locales are never read inside a sandbox.
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* \
    "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/locale/*
# Code and tests say `python` as often as `python3`.
ln -sf python3 "$rootfs"/usr/bin/python
# Mount points for the writable tmpfs mounts (the root itself is mounted read-only).
mkdir -p "$rootfs"/work "$rootfs"/tmp
chmod 1777 "$rootfs"/tmp

echo "build.sh: importing as $IMAGE"
tar -C "$rootfs" -c . | docker import \
    --change "LABEL rlgym_llm.recipe=$RECIPE_HASH" \
    --change "LABEL rlgym_llm.sandbox.image=1" \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV HOME=/work' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'ENV PYTHONDONTWRITEBYTECODE=1' \
    --change 'WORKDIR /work' \
    --change 'USER 65534:65534' \
    --change 'CMD ["sleep", "infinity"]' \
    - "$REPO:$RECIPE_HASH" >/dev/null
docker tag "$REPO:$RECIPE_HASH" "$IMAGE"
# Drop the previous recipe's tag so stale images do not pile up (containers still using it keep it alive).
if [[ -n "$current" && "$current" != "$RECIPE_HASH" ]]; then
    docker rmi "$REPO:$current" >/dev/null 2>&1 || true
fi
echo "build.sh: built $IMAGE ($REPO:$RECIPE_HASH, $(docker image inspect --format '{{ .Size }}' "$IMAGE") bytes)"
