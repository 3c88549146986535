#!/usr/bin/env bash
# GPU check of the trainer and the transformers policy (docs/gpu.md): cpu-vs-cuda agreement of
# logprobs, loss, gradients and greedy tokens, bf16 autocast, and `rlgym train` (SFT, then 2 RL
# steps) with trainer.device=cuda trainer.dtype=bfloat16. Takes ~1-2 minutes; results go to $OUT
# (or ./gpu_check_out).
#
# The GPU machine has torch, transformers, peft, pytest, hypothesis but not the project's pure-Python
# dependencies. Fetch them once, where pip reaches PyPI, into .whl/ (ignored by git):
#
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl \
#     gymnasium==1.4.0 farama-notifications==0.0.6 pydantic==2.13.4 pydantic-core==2.46.4 \
#     annotated-types==0.7.0 typing-inspection==0.4.2 hydra-core==1.3.8 omegaconf==2.3.1 \
#     math-verify==0.9.0 latex2sympy2_extended==1.11.0 typing-extensions==4.16.0
#   python3 -m pip wheel --no-deps -w .whl antlr4-python3-runtime==4.9.3   # an sdist only: built here
#
# then, on the GPU machine, from the repository root (with .whl/ beside it): bash scripts/gpu_check.sh
set -uo pipefail
OUT=${OUT:-gpu_check_out}
mkdir -p "$OUT"
exec > >(tee "$OUT/gpu_check.log") 2>&1
export PYTHONUNBUFFERED=1
if [ -d .whl ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="$PWD:$PWD/envs:$PWD/agents${PYTHONPATH:+:$PYTHONPATH}"
export RLGYM_CACHE=/tmp/rlgym_cache
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
python3 -c "import torch, transformers, peft; print('torch', torch.__version__, 'cuda', torch.version.cuda, \
'transformers', transformers.__version__, 'peft', peft.__version__, 'gpu', torch.cuda.get_device_name(0))"
python3 -c "import torch; assert torch.cuda.is_available(), 'torch sees no GPU'" || exit 1
python3 -c "import rlgym_llm, hydra, gymnasium, pydantic; print('rlgym_llm imports')" || exit 1

start=$(date +%s)
# the GPU tests, and the CPU tests of the same code paths (bf16 autocast on CPU) for comparison; the
# two config tests need the installed package's env entry points and the vLLM venv: CI runs them
timeout 400 python3 -m pytest -m "gpu or not gpu" -p no:cacheprovider -v -rA \
    -k "not config_takes and not vllm_server_gets" \
    tests/train/test_gpu.py tests/train/test_device.py tests/train/test_trainer.py tests/train/test_forward.py \
    --junitxml="$OUT/gpu_tests.xml"
rc=$?
echo "pytest exit code: $rc; $(( $(date +%s) - start )) s"
# the figures the tests recorded (logprob/loss/gradient differences, run time)
python3 - "$OUT/gpu_tests.xml" <<'PY' | tee "$OUT/figures.txt"
import sys, xml.etree.ElementTree as ET
for case in ET.parse(sys.argv[1]).iter("testcase"):
    for prop in case.iter("property"):
        print(case.get("name"), case.get("time"), "s:", prop.get("value"))
PY
nvidia-smi --query-gpu=memory.used --format=csv
exit $rc
