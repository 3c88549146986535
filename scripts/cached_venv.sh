#!/usr/bin/env bash
# A virtual environment kept in a cache outside the checkout, keyed by the recipe that builds it, and
# linked into the checkout. A fresh clone of an unchanged recipe then reuses the venv in seconds.
#
# Usage: scripts/cached_venv.sh LINK KEY_FILE... -- BUILD_COMMAND...
#   LINK          where the checkout expects the venv (e.g. .venv-vllm); becomes a symlink
#   KEY_FILE...   the files whose content defines the venv (the build script, pins)
#   BUILD_COMMAND run with $VENV set to the cache folder to fill; must exit 0 only when the venv works
#
# The cache is $RLGYM_CACHE/venvs (default ~/.cache/rlgym_llm/venvs); RLGYM_VENV_KEY_EXTRA adds text
# to the key (versions passed by the environment). A folder whose build did not finish (no READY
# file) is built again from scratch. LINK that is a real folder (an older layout) is left alone.
set -euo pipefail

link="$1"
shift
keys=()
while [[ $# -gt 0 && "$1" != "--" ]]; do
    keys+=("$1")
    shift
done
[[ "${1:-}" == "--" ]] || { echo "cached_venv.sh: usage: LINK KEY_FILE... -- BUILD_COMMAND..." >&2; exit 2; }
shift

if [[ -d "$link" && ! -L "$link" ]]; then
    echo "cached_venv.sh: $link is a folder of its own (not a cached venv); using it as it is"
    VENV="$(cd "$link" && pwd)" "$@"
    exit $?
fi

python_version="$(python3 -c 'import sys; print(sys.version)')"
key="$( (cat "${keys[@]}"; echo "$python_version"; echo "${RLGYM_VENV_KEY_EXTRA:-}") | sha256sum | cut -c1-16)"
cache="${RLGYM_CACHE:-$HOME/.cache/rlgym_llm}/venvs"
target="$cache/$(basename "$link" | sed 's/^\.//')-$key"
mkdir -p "$cache"

if [[ -f "$target/READY" ]]; then
    echo "cached_venv.sh: $link -> $target (cached, recipe $key)"
else
    rm -rf "$target"  # a build that did not finish
    echo "cached_venv.sh: building $target (recipe $key)"
    VENV="$target" "$@"
    date -u +%FT%TZ >"$target/READY"
fi
ln -sfn "$target" "$link"
