"""The loop's credit step: a registered method, its parameters, and the models behind its per-step inputs.

Some methods need inputs that only the trainer can compute from each batch (a model pass, a
fitted estimator); the registry names them (`CreditMethod.inputs`), this module computes them:

    credit = CreditAssigner.build("igpo", {"gamma": 1.0}, model=model, tokenizer=tok, make_env=make_env)
    result = credit(trajectories)          # a CreditResult; the answer probabilities were scored first

- `answer_probs` (IGPO): the gold answer behind every turn, scored teacher-forced by the policy.
- `contributions` (SPA): a progress estimator, by default the paper's protocol: fitted once on
  warm-up explorations of the starting policy (over a frozen copy of its hidden states), then frozen.

Inputs with state (SPA's estimator) are checkpointed with the run (`state_dict`).
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from rlgym_llm.core.errors import ConfigError
from rlgym_llm.core.types import Trajectory
from rlgym_llm.credit import CreditResult, compute_advantages, get_method, resolve_params

logger = logging.getLogger(__name__)


class CreditInput(Protocol):
    """A per-step input of a credit method: one entry per trajectory of the step's batch."""

    def __call__(self, trajectories: Sequence[Trajectory]) -> list[Any]: ...
    def state_dict(self) -> dict[str, Any]: ...
    def load_state_dict(self, state: Mapping[str, Any]) -> None: ...


def task_answer(env: Any) -> str:
    """The ground-truth answer of the env's current task (IGPO scores its probability)."""
    task = env.unwrapped.task
    for value in (task.answer, task.meta.get("answer"), task.meta.get("target")):
        if value is not None:
            return str(value)
    raise ConfigError([f"credit=igpo needs tasks with an answer; {type(env.unwrapped).__name__} tasks have none"])


def probe_template(probe: str) -> dict[str, str]:
    """The text around the gold answer in IGPO's probe: `authors` (their "answer now" template) or
    `<tool>.<argument>`, the answer written as that tool call, as the agent renders a model's call."""
    from rlgym_llm.train.credit_models import IGPO_TEMPLATE_PREFIX, IGPO_TEMPLATE_SUFFIX

    if probe == "authors":
        return {"prefix": IGPO_TEMPLATE_PREFIX, "suffix": IGPO_TEMPLATE_SUFFIX}
    tool, arg = probe.split(".")
    head = json.dumps({"name": tool, "arguments": {arg: 0}})  # '{"name": ..., "arguments": {"n": 0}}'
    return {"prefix": "<tool_call>" + head[: head.rindex("0")], "suffix": "}}</tool_call><|im_end|>"}


class AnswerProbs:
    """IGPO's `answer_probs`: p_0..p_{T-1} of the gold answer behind every turn, scored by the policy model.

    Args:
        model: the policy model (scored without gradient, in eval mode).
        tokenizer: its tokenizer (the answer template's ids).
        make_env: a factory of the training env; a task's gold answer is read after a reset with
            its seed (ground truth is never in an observation). Cached per task.
        micro_batch_size: probes per forward pass.
        probe: the probe's template (`IGPOParams.probe`, see `probe_template`).
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        make_env: Callable[[], Any],
        micro_batch_size: int = 16,
        probe: str = "authors",
    ):
        self.model, self.tokenizer, self.make_env = model, tokenizer, make_env
        self.micro_batch_size = micro_batch_size
        self.template = probe_template(probe)
        self._answers: dict[tuple[int | None, str], Any] = {}

    def _template(self, traj: Trajectory) -> Any:
        from rlgym_llm.train.credit_models import answer_template_ids

        key = (traj.seed, traj.task_id)
        if key not in self._answers:
            env = self.make_env()
            try:
                env.reset(seed=traj.seed, options=traj.metadata.get("options"))
                self._answers[key] = answer_template_ids(self.tokenizer, task_answer(env), **self.template)
            finally:
                env.close()
        return self._answers[key]

    def __call__(self, trajectories: Sequence[Trajectory]) -> list[Any]:
        from rlgym_llm.train.credit_models import igpo_answer_probs

        templates = [None if t.failed else self._template(t) for t in trajectories]
        pad = self.tokenizer.pad_token_id or 0
        return igpo_answer_probs(
            self.model, trajectories, templates, micro_batch_size=self.micro_batch_size, pad_id=pad
        )

    def state_dict(self) -> dict[str, Any]:
        return {}  # the answer cache is rebuilt from the envs

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        pass


class Contributions:
    """SPA's `contributions`: c_{i,t} of a progress estimator (`credit_models.ProgressEstimator`).

    offline (the paper's protocol): on the first call the estimator is trained on warm-up
    explorations (`explore()`: trajectories of the starting policy; without one, the first batch,
    which the same policy rolled out), then frozen: later calls only score. online: refit on every
    batch before scoring it (this library's earlier behaviour; the estimator then scores the data it
    was just fitted on).

    Args:
        estimator: the estimator (its featurizer decides the inputs).
        online: refit on every batch instead of fitting once and freezing.
        epochs: training passes of a fit.
        explore: returns the exploration trajectories (offline mode).
    """

    def __init__(
        self,
        estimator: Any,
        *,
        online: bool = False,
        epochs: int = 200,
        explore: Callable[[], Sequence[Trajectory]] | None = None,
    ):
        self.estimator, self.online, self.epochs, self.explore = estimator, online, epochs, explore
        self.fitted = False
        self.fit_losses: list[float] = []  # of the offline fit, per epoch

    def __call__(self, trajectories: Sequence[Trajectory]) -> list[Any]:
        if self.online:
            self.estimator.fit(trajectories, epochs=self.epochs)
        elif not self.fitted:
            data = list(self.explore()) if self.explore is not None else list(trajectories)
            self.fit_losses = self.estimator.fit(data, epochs=self.epochs)
            self.fitted = True
            if self.fit_losses:
                logger.info(
                    "SPA estimator fitted on %d exploration trajectories (loss %.4f -> %.4f), now frozen",
                    len(data),
                    self.fit_losses[0],
                    self.fit_losses[-1],
                )
        return self.estimator.contributions(trajectories)

    def state_dict(self) -> dict[str, Any]:
        return {"estimator": self.estimator.state_dict(), "fitted": self.fitted}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if state:
            self.estimator.load_state_dict(state["estimator"])
            self.fitted = bool(state["fitted"])


@dataclass(frozen=True)
class InputContext:
    """What a per-step input may be built from.

    Args:
        params: the method's resolved parameters (its params dataclass).
        model: the policy model (trained in place).
        tokenizer: its tokenizer.
        make_env: a factory of the training env.
        seed: the run's seed.
        explore: rolls out `n` tasks of warm-up exploration with the starting policy (SPA's offline fit).
    """

    params: Any
    model: Any = None
    tokenizer: Any = None
    make_env: Callable[[], Any] | None = None
    seed: int = 0
    explore: Callable[[int], Sequence[Trajectory]] | None = None


def build_contributions(ctx: InputContext) -> Contributions:
    """SPA's estimator as its parameters say: features (a frozen copy of the starting policy's hidden
    states, or env signals), offline (explore, fit, freeze) or online (refit every batch)."""
    import copy

    from rlgym_llm.train.credit_models import HiddenStateFeatures, ProgressEstimator, SignalFeatures

    p = ctx.params
    featurizer: Any
    if p.features == "hidden":
        if ctx.model is None:
            raise ConfigError(["credit=spa with features: hidden needs the policy model; or set features: signals"])
        # the estimator reads the policy it starts from (the paper's SFT backbone); a frozen copy keeps
        # the fitted head valid while the policy trains
        frozen = copy.deepcopy(ctx.model).eval()
        for param in frozen.parameters():
            param.requires_grad_(False)
        pad = getattr(ctx.tokenizer, "pad_token_id", None) or 0
        featurizer = HiddenStateFeatures(frozen, pad_id=pad)
    else:
        featurizer = SignalFeatures(tuple(p.signals))
    estimator = ProgressEstimator(featurizer, hidden=p.head_hidden, outcome=p.outcome, seed=ctx.seed)
    explore = None
    if p.estimator == "offline" and p.explore_tasks > 0 and ctx.explore is not None:
        run, n = ctx.explore, p.explore_tasks
        explore = lambda: run(n)  # noqa: E731
    return Contributions(estimator, online=p.estimator == "online", epochs=p.epochs, explore=explore)


def build_answer_probs(ctx: InputContext) -> AnswerProbs:
    """IGPO's scoring pass over the policy model; the gold answers come from envs made by `make_env`."""
    if ctx.model is None or ctx.tokenizer is None or ctx.make_env is None:
        raise ConfigError(["credit=igpo needs the policy model, its tokenizer and the env factory"])
    return AnswerProbs(ctx.model, ctx.tokenizer, ctx.make_env, probe=ctx.params.probe)


INPUTS: dict[str, Callable[[InputContext], CreditInput]] = {
    "answer_probs": build_answer_probs,
    "contributions": build_contributions,
}
"""Per-step input name (as methods declare it) -> its builder, called with an `InputContext` (the
method's parameters, the run's model, tokenizer, env factory, seed and exploration). A method that
needs a new kind of input adds its builder here."""


class CreditAssigner:
    """Per step: compute the method's inputs from the batch, then its advantages.

    Args:
        method: a registered credit method.
        params: its settings (defaults for the rest); checked at once.
        inputs: one `CreditInput` per name in the method's `inputs`.

    Raises:
        ConfigError: bad parameters, or an input of the method is missing.
    """

    def __init__(self, method: str, params: Mapping[str, Any], inputs: Mapping[str, CreditInput] | None = None):
        self.method = get_method(method)
        self.params = dataclasses.asdict(resolve_params(method, params))
        self.inputs = dict(inputs or {})
        missing = [name for name in self.method.inputs if name not in self.inputs]
        if missing:
            raise ConfigError([f"credit method {method} needs its per-step inputs {missing} (see INPUTS)"])

    @classmethod
    def build(
        cls,
        method: str,
        params: Mapping[str, Any],
        *,
        model: Any = None,
        tokenizer: Any = None,
        make_env: Callable[[], Any] | None = None,
        seed: int = 0,
        explore: Callable[[int], Sequence[Trajectory]] | None = None,
    ) -> CreditAssigner:
        """The assigner with the builders of `INPUTS` for every input the method declares.

        Args:
            explore: rolls out n warm-up tasks with the starting policy (SPA's offline fit).
        """
        names = get_method(method).inputs
        ctx = InputContext(resolve_params(method, params), model, tokenizer, make_env, seed, explore)
        return cls(method, params, {n: INPUTS[n](ctx) for n in names})

    def __call__(self, trajectories: Sequence[Trajectory]) -> CreditResult:
        values = {name: provider(trajectories) for name, provider in self.inputs.items()}
        return compute_advantages(trajectories, self.method.name, **self.params, **values)

    def state_dict(self) -> dict[str, Any]:
        """The state of the inputs that learn (SPA's estimator), for the run's checkpoint."""
        return {name: provider.state_dict() for name, provider in self.inputs.items()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        for name, provider in self.inputs.items():
            if name in state:
                provider.load_state_dict(state[name])
