# One toolchain locally and in CI. `make install test` on a fresh machine runs every test tier.
PY ?= python3
PIP := $(PY) -m pip
EXTRAS ?= train,docker,ray,search,gui,dense,dev

.PHONY: install services sandbox-image test test-fast lint format demo bench clean

install:  ## install torch first (exact CPU pin), then the project with its extras
	$(PIP) install --quiet torch==2.13.0
	$(PIP) install --quiet -e ".[$(EXTRAS)]"

services: sandbox-image  ## start what the real-component tests need

sandbox-image:  ## Docker daemon (no bridge, no firewall rules) + the sandbox image; idempotent
	bash .ci/docker-setup.sh

# pytest exits 5 when it collects no test: an empty tier is not a failure.
test:  ## every tier: unit, slow, docker, ray, vllm (all but gpu)
	$(PY) -m pytest -m "not gpu" -q; rc=$$?; [ $$rc -eq 5 ] && exit 0; exit $$rc

test-fast:  ## the default tier: fast unit tests
	$(PY) -m pytest -q

lint:
	ruff check .
	ruff format --check .
	mypy

format:
	ruff format .
	ruff check --fix .

demo:  ## check the Math env from the shell, then play the single-file custom-env example
	rlgym check-env rlgym/Math-v0
	$(PY) examples/custom_env.py

bench:
	$(PY) benchmarks/sandbox_latency.py

clean:
	rm -rf build dist *.egg-info .pytest_cache .ruff_cache .mypy_cache .hypothesis
