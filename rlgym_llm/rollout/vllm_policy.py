"""A policy backed by a vLLM server this process owns, with weight sync from the trainer.

`VLLMPolicy` = `VLLMServer` (the engine, in the project's vLLM venv) + `OpenAICompatiblePolicy` (the
HTTP client). After each training update the trainer calls `policy.sync_weights(model)` and the
server serves the new weights from its next request on. Three paths (`sync=` picks; `auto` takes
the first that applies), each proven in `tests/rollout/test_weight_sync.py` by comparing the
server's logprobs with the trainer's:

- **inplace** (full weights, the default): the weights go through a `WeightTransport` (shared memory
  here, where the trainer's CPU tensors then live) and every worker of the server (each tensor- and
  data-parallel rank) loads them into the running model (`vllm_worker.WeightSyncExtension`, called
  through vLLM's `/collective_rpc`), tied LM head included; the prefix cache is then reset. With
  `inplace_load="direct"` the workers copy straight into the served parameters: SmolLM2-135M in
  2.5x an in-memory copy of its 513 MiB (`benchmarks/results/weight_sync.md`; a restart took 141 s).
- **lora** (a `peft` model, server started with `max_lora_rank`): the adapter is saved (a few MB) and
  loaded at runtime under a new name (`/v1/load_lora_adapter`); requests switch to it. Milliseconds
  on the server; the base weights stay loaded.
- **restart** (the fallback): the weights are saved and the server restarts on them, on the same
  port (17-30 s on an idle 2-core CPU, 70-150 s loaded). `auto` falls back to it, once and for the
  rest of the run, when an in-place sync fails; `WeightSync.fallback` says why.

    with VLLMPolicy(build_tiny_model(), max_lora_rank=8) as policy:
        trajectories = RolloutManager(env_id, agent, policy, config).run_sync(seeds)
        ...  # update the model
        policy.sync_weights(model)

Call `sync_weights` between rollouts, not while requests are in flight.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import logging
import os
import shutil
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlgym_llm.rollout.errors import EngineError
from rlgym_llm.rollout.openai_policy import OpenAICompatiblePolicy
from rlgym_llm.rollout.policy import Completion, SamplingParams
from rlgym_llm.rollout.vllm_server import VLLMServer
from rlgym_llm.rollout.vllm_worker import EXTENSION_CLS, MODULE_NAME, RPC_METHOD
from rlgym_llm.rollout.weight_transport import (
    SharedMemoryTransport,
    WeightTransport,
    folder_weights,
    full_weights,
)

logger = logging.getLogger(__name__)

# Files a served folder needs besides the weights; copied from the original model folder, since the
# trainer saves only what the model object knows (config + weights).
_TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "chat_template.jinja",
    "vocab.json",
    "merges.txt",
    "generation_config.json",
)

INPLACE_LOADS = ("auto", "direct", "reload")
"""`VLLMPolicy(inplace_load=...)`: how the workers load full weights in place (see `vllm_worker`)."""
SYNC_MODES = ("auto", "inplace", "lora", "restart")
"""`VLLMPolicy(sync=...)`: auto (lora for adapters, else inplace, restart if inplace fails), or one path."""


@dataclass(frozen=True)
class WeightSync:
    """What one `sync_weights` call did.

    Args:
        version: 1 for the first sync, then 2, 3, ...
        mode: "inplace" (full weights loaded into the running server), "lora" (adapter loaded at
            runtime) or "restart" (full weights saved, server restarted on them).
        served_name: the model name requests now use.
        path: the folder the server loaded (None for inplace: nothing is saved).
        seconds: wall time of the sync, saving or transfer included.
        fallback: why `auto` restarted instead of syncing in place (None: it did not).
        server_seconds: inplace: the workers' load time, transfer excluded.
        head_max_abs_diff: inplace: the served LM head's largest logit difference from the sent
            weights' on a probe (`vllm_worker._probe_head`; None where it cannot probe).
        load: inplace: how the workers loaded (`direct` through the model's `load_weights`, or
            vLLM's `reload`; see `vllm_worker`).
        workers: inplace: how many workers answered (tensor-parallel ranks of the first engine).
    """

    version: int
    mode: str
    served_name: str
    path: Path | None
    seconds: float
    fallback: str | None = None
    server_seconds: float | None = None
    head_max_abs_diff: float | None = None
    load: str | None = None
    workers: int | None = None


def is_peft_model(model: Any) -> bool:
    """True for a `peft` model (it saves an adapter, not full weights)."""
    return hasattr(model, "peft_config") and hasattr(model, "get_base_model")


class VLLMPolicy:
    """Generate from a vLLM server this object starts, and push trainer weights to it (a `TrainablePolicy`).

    Args:
        model_dir: the Hugging Face folder to serve first (tokenizer files are reused for every sync).
        max_lora_rank: enable runtime LoRA adapters up to this rank (None: no LoRA; a peft model is
            then merged and synced as full weights).
        work_dir: where synced weights are saved; default a temporary folder removed by `stop()`.
        client_kwargs: passed to `OpenAICompatiblePolicy` (timeouts, retries, pool size).
        sync: how full weights and adapters reach the server (`SYNC_MODES`): auto, inplace, lora or
            restart. auto and inplace start the server with the worker extension and vLLM's dev
            endpoints (`VLLM_SERVER_DEV_MODE=1`; the server listens on loopback only by default).
        transport: how in-place weights travel (default `SharedMemoryTransport()`).
        inplace_load: how the workers load in-place weights (`INPLACE_LOADS`): `direct` (the
            model's `load_weights` into the live parameters, one copy; on CPU the linear layers then
            compute with `torch.nn.functional.linear` over plain weights, about half as fast as
            vLLM's packed kernels), `reload` (vLLM's in-place reload: keeps those kernels, whose
            weights are re-packed at every sync) or `auto` (direct on a GPU, where it costs
            nothing, reload on CPU). Quantized and MLA models always reload. See docs/vllm.md.
        **server_kwargs: passed to `VLLMServer` (`max_model_len`, `port`, `extra_args`, `env`, ...).
    """

    def __init__(
        self,
        model_dir: str | os.PathLike,
        max_lora_rank: int | None = None,
        work_dir: str | os.PathLike | None = None,
        client_kwargs: dict[str, Any] | None = None,
        sync: str = "auto",
        transport: WeightTransport | None = None,
        inplace_load: str = "auto",
        **server_kwargs: Any,
    ):
        if sync not in SYNC_MODES:
            raise ValueError(f"sync={sync!r}: choose one of {', '.join(SYNC_MODES)}")
        if inplace_load not in INPLACE_LOADS:
            raise ValueError(f"inplace_load={inplace_load!r}: choose one of {', '.join(INPLACE_LOADS)}")
        if sync == "lora" and max_lora_rank is None:
            raise ValueError("sync='lora' needs a server with LoRA: pass max_lora_rank=<the adapters' rank>")
        self.base_dir = Path(model_dir)
        self.max_lora_rank = max_lora_rank
        self.sync = sync
        self.transport: WeightTransport = transport or SharedMemoryTransport()
        self.inplace_load = inplace_load
        extra_args: list[str] = list(server_kwargs.pop("extra_args", ()))
        env = dict(server_kwargs.pop("env", None) or {})
        if max_lora_rank is not None:
            extra_args += ["--enable-lora", "--max-lora-rank", str(max_lora_rank)]
            env.setdefault("VLLM_ALLOW_RUNTIME_LORA_UPDATING", "True")  # enables /v1/load_lora_adapter
        if sync in ("auto", "inplace"):
            extra_args += ["--worker-extension-cls", EXTENSION_CLS]
            env["VLLM_SERVER_DEV_MODE"] = "1"  # enables /collective_rpc and /reset_prefix_cache
        self.server = VLLMServer(model_dir, extra_args=extra_args, env=env, **server_kwargs)
        self._client_kwargs = dict(client_kwargs or {})
        self.client: OpenAICompatiblePolicy | None = None
        self._own_work_dir = work_dir is None
        self.work_dir = Path(work_dir) if work_dir is not None else None
        self.version = 0
        self.last_sync: WeightSync | None = None
        self._adapter: str | None = None  # the LoRA adapter requests use now, if any
        self._inplace_failed: str | None = None  # why auto stopped trying in place, if it did
        self._ext_dir: Path | None = None  # holds the worker extension module for the server

    # --- lifecycle ---------------------------------------------------------------------------------

    def start(self) -> VLLMPolicy:
        """Start the server (blocks until it is healthy)."""
        if self.sync in ("auto", "inplace") and self._ext_dir is None:
            # The server's Python lacks rlgym_llm's dependencies: it gets the extension as a lone module.
            self._ext_dir = Path(tempfile.mkdtemp(prefix="rlgym-vllm-ext-"))
            shutil.copy2(Path(__file__).with_name("vllm_worker.py"), self._ext_dir / f"{MODULE_NAME}.py")
            self.server.env["PYTHONPATH"] = str(self._ext_dir)
        self.server.start()
        if self.client is None:
            self.client = OpenAICompatiblePolicy(
                self.server.base_url,
                model=self.served_name,
                max_context=self.server.max_model_len,
                **self._client_kwargs,
            )
        return self

    def stop(self) -> None:
        """Stop the server and remove the temporary sync folder."""
        self.server.stop()
        if self._own_work_dir and self.work_dir is not None:
            shutil.rmtree(self.work_dir, ignore_errors=True)
            self.work_dir = None
        if self._ext_dir is not None:
            shutil.rmtree(self._ext_dir, ignore_errors=True)
            self._ext_dir = None
        self.transport.close()

    async def close(self) -> None:
        """`TrainablePolicy.close`: close the client's connections, then stop the server."""
        if self.client is not None:
            await self.client.close()
        await asyncio.to_thread(self.stop)

    def __enter__(self) -> VLLMPolicy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def served_name(self) -> str:
        """The model name requests use: the current LoRA adapter, else the served base model."""
        return self._adapter or self.server.model_name

    # --- the Policy API ----------------------------------------------------------------------------

    async def generate(self, prompt_token_ids: Sequence[int], sampling: SamplingParams) -> Completion:
        """Sample one completion from the server (see `OpenAICompatiblePolicy.generate`)."""
        if self.client is None:
            raise RuntimeError("the vLLM policy is not started; call start() or use it as a context manager")
        try:
            return await self.client.generate(prompt_token_ids, sampling)
        except EngineError as e:
            code = self.server.exit_code
            # A server whose engine died refuses connections while its API process still tears down
            # (seconds on a loaded machine): wait for its exit code before saying why.
            for _ in range(_EXIT_WAIT_POLLS if code is None and _connection_refused(e) else 0):
                await asyncio.sleep(0.2)
                if (code := self.server.exit_code) is not None:
                    break
            if code is None:
                raise
            # The server this policy owns is gone: say so, with its root cause, instead of "cannot connect".
            cause = self.server.first_error() or "no error line in its log"
            raise EngineError(
                f"the vLLM server exited (code {code}): {cause} (log: {self.server.log_path}); the request: {e}",
                transient=False,
            ) from e

    # --- weight sync -------------------------------------------------------------------------------

    def sync_weights(self, model_or_dir: Any) -> WeightSync:
        """Make the server serve `model_or_dir` from the next request on.

        Args:
            model_or_dir: a Hugging Face model (full weights), a `peft` model (its LoRA adapter), or a
                folder holding either (`config.json` + weights, or `adapter_config.json` + adapter).

        Returns:
            What was done (mode, served name, time taken, and why auto fell back to a restart).

        Raises:
            EngineError: the server refused the adapter, or (sync="inplace") the in-place load.
            VLLMServerError: the server did not come back after a restart.
        """
        if self.client is None:
            raise RuntimeError("start the vLLM policy before syncing weights")
        t0 = time.perf_counter()
        version = self.version + 1
        mode, fallback, loaded, folder = self._mode(model_or_dir), None, {}, None
        if mode == "inplace":
            try:
                loaded = self._sync_inplace(model_or_dir)
            except (EngineError, OSError, TypeError) as e:  # the server, the tmpfs, an unsendable dtype
                if self.sync == "inplace":
                    raise
                mode = "restart"
                fallback = self._inplace_failed = f"in-place sync failed, restarting instead: {e}"
                logger.warning("weights v%d: %s (later syncs restart too)", version, fallback)
        if mode != "inplace":
            folder = self._save(model_or_dir, version, adapter=mode == "lora")
            if mode == "lora":
                self._load_adapter(folder, version)
            else:
                self._restart(folder)
        self.version = version
        seconds = time.perf_counter() - t0
        self.last_sync = WeightSync(
            version,
            mode,
            self.served_name,
            folder,
            seconds,
            fallback,
            loaded.get("seconds"),
            loaded.get("head_max_abs_diff"),
            loaded.get("path"),
            loaded.get("workers"),
        )
        logger.info("weights v%d synced to vLLM by %s in %.2fs", version, mode, seconds)
        return self.last_sync

    def _mode(self, model_or_dir: Any) -> str:
        """The path this sync takes: lora for an adapter the server can load, else full weights."""
        if isinstance(model_or_dir, (str, os.PathLike)):
            adapter = (Path(model_or_dir) / "adapter_config.json").exists()
        else:
            adapter = is_peft_model(model_or_dir)
        if adapter and self.max_lora_rank is not None and self.sync in ("auto", "lora"):
            return "lora"
        if self.sync == "lora":
            raise ValueError("sync='lora' syncs LoRA adapters only; this is a full model (use sync='auto')")
        if adapter and isinstance(model_or_dir, (str, os.PathLike)):
            raise ValueError(
                f"{model_or_dir} is a LoRA adapter: create VLLMPolicy with max_lora_rank=<its rank> and sync='auto'"
            )
        if self.sync == "restart" or self._inplace_failed is not None:
            return "restart"
        return "inplace"

    def _sync_inplace(self, model_or_dir: Any) -> dict[str, Any]:
        """Send the full weights through the transport; the workers load them. Returns what the
        slowest worker reported (`vllm_worker.WeightSyncExtension.rlgym_load_weights`)."""
        if isinstance(model_or_dir, (str, os.PathLike)):
            weights, tied = folder_weights(Path(model_or_dir))
        else:
            model = model_or_dir
            if is_peft_model(model):  # served without LoRA: the merged weights (on a copy)
                model = copy.deepcopy(model).merge_and_unload()
            weights, tied = full_weights(model)
        handle = self.transport.send(weights, tied)
        try:
            # the worker's "auto" is direct wherever the model allows it
            load = "auto" if self._inplace_load() == "direct" else "reload"
            body = {"method": RPC_METHOD, "args": [json.dumps({"load": load, **handle})], "timeout": 600}
            reply = self._post("/collective_rpc", body, timeout=660)
        finally:
            self.transport.release(handle)
        try:
            results = json.loads(reply)["results"]
        except (ValueError, KeyError, TypeError) as e:
            raise EngineError(f"/collective_rpc answered {reply[:300]!r}", transient=False) from e
        if not results or any(not isinstance(r, dict) or r.get("tensors") != len(weights) for r in results):
            raise EngineError(f"the vLLM workers did not load all {len(weights)} tensors: {results!r}", transient=False)
        self._reset_prefix_cache()  # cached KV blocks were computed with the old weights
        assert self.client is not None
        self._adapter = None
        self.client.model = self.server.model_name
        # Every rank probes what it can; the first engine's ranks answer (vLLM returns one engine's list).
        slowest = max(results, key=lambda r: float(r["seconds"]))
        probes = [r["head_max_abs_diff"] for r in results if r.get("head_max_abs_diff") is not None]
        return {**slowest, "head_max_abs_diff": max(probes, default=None), "workers": len(results)}

    def _inplace_load(self) -> str:
        """`inplace_load` resolved: auto is direct on a GPU and reload on CPU (see the class doc)."""
        if self.inplace_load != "auto":
            return self.inplace_load
        return "direct" if self.server.device == "cuda" else "reload"

    def _reset_prefix_cache(self, tries: int = 20) -> None:
        for _ in range(tries):  # refused while requests still hold blocks
            if json.loads(self._post("/reset_prefix_cache", {})).get("success"):
                return
            time.sleep(0.25)
        raise EngineError("vLLM refused to reset its prefix cache: are requests still running?", transient=False)

    def _save(self, model_or_dir: Any, version: int, adapter: bool = True) -> Path:
        """The folder to serve: the given one, or the model saved under the work dir (a peft model
        as its adapter when `adapter` and the server has LoRA, else merged)."""
        if isinstance(model_or_dir, (str, os.PathLike)):
            folder = Path(model_or_dir)
            if not (folder / "adapter_config.json").exists() and not (folder / "config.json").exists():
                raise FileNotFoundError(f"{folder} holds neither a model (config.json) nor an adapter")
            if (folder / "adapter_config.json").exists() and self.max_lora_rank is None:
                raise ValueError(f"{folder} is a LoRA adapter: create VLLMPolicy with max_lora_rank=<its rank>")
            return folder
        if self.work_dir is None:
            self.work_dir = Path(tempfile.mkdtemp(prefix="rlgym-vllm-sync-"))
        folder = self.work_dir / f"v{version}"
        shutil.rmtree(folder, ignore_errors=True)
        model = model_or_dir
        if is_peft_model(model):
            if adapter and self.max_lora_rank is not None:
                model.save_pretrained(folder)  # the adapter only
                return folder
            # No LoRA on the server: serve the merged weights (on a copy; the trainer keeps its adapter).
            model = copy.deepcopy(model).merge_and_unload()
        model.save_pretrained(folder)
        for name in _TOKENIZER_FILES:
            if (self.base_dir / name).exists() and not (folder / name).exists():
                shutil.copy2(self.base_dir / name, folder / name)
        return folder

    def _load_adapter(self, folder: Path, version: int) -> None:
        if self.max_lora_rank is None:
            raise ValueError("LoRA sync needs a server with LoRA enabled: create VLLMPolicy with max_lora_rank=...")
        assert self.client is not None
        name, previous = f"{self.server.model_name}-lora-v{version}", self._adapter
        # A fresh name per version: vLLM caches adapters by name, so re-using one would serve the old weights.
        self._post("/v1/load_lora_adapter", {"lora_name": name, "lora_path": str(folder)})
        self._adapter = self.client.model = name
        if previous is not None:
            with contextlib.suppress(EngineError):  # only frees memory; the new adapter already serves
                self._post("/v1/unload_lora_adapter", {"lora_name": previous})

    def _restart(self, folder: Path) -> None:
        assert self.client is not None
        previous = self.server.model_dir
        self.server.stop()
        self.server.model_dir = folder  # same port and served name: requests need not change
        self.server.start()
        self._adapter = None
        self.client.model = self.server.model_name
        self.client.base_url = self.server.base_url.rstrip("/")
        self.client.reset_connections()  # pooled connections went to the old process
        owned = self.work_dir is not None and previous.parent == self.work_dir
        if owned and previous != folder:
            shutil.rmtree(previous, ignore_errors=True)  # one saved copy at a time

    def _post(self, path: str, body: dict[str, Any], timeout: float = 120) -> str:
        """A small synchronous control request to the server (no retries: the server is local)."""
        url = f"http://{self.server.host}:{self.server.port}{path}"
        request = urllib.request.Request(
            url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as resp:
                return str(resp.read().decode(errors="replace"))
        except urllib.error.HTTPError as e:
            detail = e.read().decode(errors="replace")[:600]
            raise EngineError(f"POST {path} -> HTTP {e.code}: {detail}", transient=False) from e
        except OSError as e:
            raise EngineError(f"POST {path} failed: {e}", transient=True) from e


_EXIT_WAIT_POLLS = 75  # 15 s of 0.2 s polls


def _connection_refused(error: BaseException) -> bool:
    """Whether a connection failure (an OSError, aiohttp's connector errors included) caused `error`."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, OSError):
            return True
        seen = seen.__cause__
    return False
