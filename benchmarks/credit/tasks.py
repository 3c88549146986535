"""The diagnostic tasks: small multi-turn tasks, each isolating one property a credit method claims to exploit.

Every task is a family of episodes over discrete observations, parametrised by one knob (its difficulty
along the property). An episode is a list of turns; a turn is one or more decisions (the "tokens" of
the turn), each made from a few categorical features (global integer ids) among `n_choices` actions.
Each turn reports the signals the LLM envs report and the credit methods read: `tool_ok`, `state_key`,
`outcome_level` (only where the task has ordered levels), and the step reward (the outcome, on the last
turn). Success is reward > 0; every reward here is 0 or 1.

The rule the policy must learn is shared by all contents of a task (a cue's right action), so what it
learns on train contents can carry over to test contents; the contents themselves (a topic with a cue,
a cue sequence or a secret) are split by a hash into train (3/4) and test (1/4), disjoint by content as
the envs' splits are (`content_split`, `Task.split_key`): no test content is ever trained on. Contents
that differ only by a common shift of their cues (or, for one-cue tasks and secrets, share a topic) go
to one split together, so each split's cues and secrets are uniform over the actions they call for,
and a policy that ignores the observations scores at chance (`blind_success`) on either split.

    control      one decision, the outcome says whether it was right (knob: actions)
    delay        the decisive turn first, then k turns of noise before the reward (knob: k)
    distractors  one decisive turn among k+1 alike turns whose actions do not matter (knob: k)
    subgoals     K ordered sub-goals; a "farm" action is a valid call that makes no progress (knob: K)
    info         questions reveal bits of a hidden secret, then the answer (knob: bits)
    progress     T steps that must all be right; each right step is progress (knob: T)
    recurring    a ladder where a wrong step falls back to the bottom, so states recur (knob: rungs)
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

VERSION = 1
"""Bump with any change to what an episode does (stored suite runs of another version are not reused)."""

N_CUES = 8
N_TOPICS = 32

Act = Callable[[Sequence[int], int], int]
"""The policy as a task sees it: (feature ids of one decision, number of choices) -> the action."""


@dataclass
class Decision:
    features: tuple[int, ...]
    n_choices: int
    action: int


@dataclass
class StepRecord:
    """One turn: its decisions and what the task answered."""

    decisions: list[Decision]
    tool_ok: bool
    state_key: str
    reward: float = 0.0
    done: bool = False
    level: int | None = None  # the ordered outcome level after the turn (subgoals only)
    probe: float | None = None  # info only: P(gold answer) before the turn, under the acting policy


@dataclass
class Episode:
    task: str
    knob: int
    content: tuple[int, ...]
    opening_key: str
    steps: list[StepRecord] = field(default_factory=list)

    @property
    def reward(self) -> float:
        return self.steps[-1].reward if self.steps else 0.0


def content_split(key: tuple[int, ...], task: str) -> str:
    """`train` or `test` by a hash of a content's split key (3/4 train): a content always lands in one split."""
    digest = hashlib.sha256(f"{task}|{key}".encode()).digest()
    return "test" if digest[0] % 4 == 0 else "train"


def shift_class(cues: Sequence[int]) -> tuple[int, ...]:
    """The cue sequence up to a shift of every cue by the same amount (mod N_CUES). Splitting by it puts
    all 8 shifts of a sequence in one split, so that in each split every position's cue, hence its right
    action, is uniform: a blind policy cannot exploit a skewed test pool."""
    return tuple((c - cues[0]) % N_CUES for c in cues) if cues else ()


def rule(cue: int, n: int) -> int:
    """The right action for a cue among n: a fixed permutation of the cues, folded onto n actions
    (uniform over the n actions when n divides N_CUES)."""
    return (5 * cue + 3) % N_CUES % n


class Features:
    """Global feature ids: one block per named feature, allocated on first use."""

    def __init__(self) -> None:
        self.blocks: dict[str, tuple[int, int]] = {}
        self.size = 0

    def block(self, name: str, n: int) -> int:
        if name not in self.blocks:
            self.blocks[name] = (self.size, n)
            self.size += n
        start, width = self.blocks[name]
        if width != n:
            raise ValueError(f"feature block {name!r} has {width} ids, asked for {n}")
        return start

    def id(self, name: str, n: int, i: int) -> int:
        if not 0 <= i < n:
            raise ValueError(f"feature {name!r}: index {i} outside [0, {n})")
        return self.block(name, n) + i


class Task:
    """A task family; subclasses define the contents and one episode.

    Args:
        knob: the value of the task's knob.
    """

    name = ""
    isolates = ""
    knob_name = ""
    knobs: tuple[int, ...] = ()
    #: the method(s) whose paper claims this property (the suite's "built for it")
    built_for: tuple[str, ...] = ()

    def __init__(self, knob: int):
        self.knob = knob
        self.f = Features()
        self._declare()
        self.n_features = self.f.size
        self._pools: dict[str, list[tuple[int, ...]]] = {}

    # --- subclass API
    def _declare(self) -> None:
        """Allocate every feature block (so the feature count is known before any episode)."""
        raise NotImplementedError

    def all_contents(self) -> list[tuple[int, ...]]:
        raise NotImplementedError

    def split_key(self, content: tuple[int, ...]) -> tuple[int, ...]:
        """What decides a content's split (contents with one key share a split): the topic, and the cue
        sequence up to a common shift (`shift_class`)."""
        raise NotImplementedError

    def play(self, content: tuple[int, ...], act: Act, rng: np.random.Generator, probe: Any = None) -> Episode:
        raise NotImplementedError

    @property
    def n_actions(self) -> int:
        raise NotImplementedError

    def blind_success(self) -> float:
        """The success rate of the best policy that ignores the observations (chance)."""
        raise NotImplementedError

    # --- shared
    def pool(self, split: str) -> list[tuple[int, ...]]:
        if split not in ("train", "test"):
            raise ValueError(f"split must be 'train' or 'test', got {split!r}")
        if split not in self._pools:
            self._pools[split] = [
                c for c in self.all_contents() if content_split(self.split_key(c), self.name) == split
            ]
        return self._pools[split]

    def key(self, content: tuple[int, ...], *state: Any) -> str:
        return f"{self.name}:{self.knob}:{content}:{state}"


def _sequences(length: int, limit: int, rng_seed: int) -> list[tuple[int, ...]]:
    """Cue sequences of `length`: whole shift classes (all N_CUES shifts of each), all of them when there
    are at most `limit` sequences, else a fixed sample of classes."""
    tails = N_CUES ** (length - 1)
    n_classes = min(tails, max(limit // N_CUES, 1))
    rng = np.random.default_rng(rng_seed)
    picks = range(tails) if n_classes == tails else rng.choice(tails, size=n_classes, replace=False)
    out = []
    for i in sorted(int(x) for x in picks):
        tail = np.unravel_index(i, (N_CUES,) * (length - 1)) if length > 1 else ()
        base = (0, *(int(x) for x in tail))
        out += [tuple((c + shift) % N_CUES for c in base) for shift in range(N_CUES)]
    return out


class Control(Task):
    """One decision: the cue says which of `knob` actions is right; the outcome alone says everything."""

    name = "control"
    isolates = "the outcome alone is enough (one decisive turn, reward right after it)"
    knob_name = "actions"
    knobs = (2, 4, 8)
    built_for = ("grpo",)

    def _declare(self) -> None:
        self.f.block("bias", 1), self.f.block("cue", N_CUES), self.f.block("topic", 2 * N_TOPICS)

    @property
    def n_actions(self) -> int:
        return self.knob

    def all_contents(self) -> list[tuple[int, ...]]:
        return [(c, t) for c in range(N_CUES) for t in range(2 * N_TOPICS)]

    def split_key(self, content):
        return (content[1],)

    def play(self, content, act, rng, probe=None):
        cue, topic = content
        ep = Episode(self.name, self.knob, content, self.key(content))
        feats = (0, self.f.id("cue", N_CUES, cue), self.f.id("topic", 2 * N_TOPICS, topic))
        a = act(feats, self.knob)
        ok = a == rule(cue, self.knob)
        ep.steps.append(StepRecord([Decision(feats, self.knob, a)], True, self.key(content, 1), float(ok), True))
        return ep

    def blind_success(self) -> float:
        return 1.0 / self.knob


class Delay(Task):
    """The decisive turn first (cue -> one of 4 actions), then `knob` turns of noise (random symbols, any
    action, no effect), then the reward: the decision and its reward are knob turns apart."""

    name = "delay"
    isolates = "k turns of noise between the decisive turn and the reward"
    knob_name = "noise turns"
    knobs = (0, 4, 12)
    built_for = ("gigpo", "spa")

    A = 4

    def _declare(self) -> None:
        self.f.block("bias", 1), self.f.block("cue", N_CUES), self.f.block("topic", 2 * N_TOPICS)
        self.f.block("noise", N_CUES)

    @property
    def n_actions(self) -> int:
        return self.A

    def all_contents(self):
        return [(c, t) for c in range(N_CUES) for t in range(2 * N_TOPICS)]

    def split_key(self, content):
        return (content[1],)

    def play(self, content, act, rng, probe=None):
        cue, topic = content
        ep = Episode(self.name, self.knob, content, self.key(content))
        feats = (0, self.f.id("cue", N_CUES, cue), self.f.id("topic", 2 * N_TOPICS, topic))
        a = act(feats, self.A)
        ok = a == rule(cue, self.A)
        last = self.knob == 0
        ep.steps.append(StepRecord([Decision(feats, self.A, a)], True, self.key(content, 1), float(ok and last), last))
        for t in range(self.knob):
            noise = int(rng.integers(N_CUES))
            nf = (0, self.f.id("noise", N_CUES, noise))
            b = act(nf, self.A)
            last = t == self.knob - 1
            ep.steps.append(
                StepRecord([Decision(nf, self.A, b)], True, self.key(content, t + 2), float(ok and last), last)
            )
        return ep

    def blind_success(self) -> float:
        return 1.0 / self.A


class Distractors(Task):
    """knob + 1 alike turns, each showing a cue; only one of them (marked as such in the observation)
    decides the outcome, the others' actions do not matter."""

    name = "distractors"
    isolates = "distractor turns that look alike but do not matter"
    knob_name = "distractor turns"
    knobs = (0, 3, 9)
    built_for = ("spa",)

    A = 4

    def _declare(self) -> None:
        self.f.block("bias", 1), self.f.block("cue", N_CUES), self.f.block("topic", N_TOPICS)
        self.f.block("marker", 2)

    @property
    def n_actions(self) -> int:
        return self.A

    def all_contents(self):
        n = self.knob + 1
        seqs = _sequences(n, 256, rng_seed=n)
        return [(t, p, *s) for s in seqs for p in range(n) for t in range(N_TOPICS)]

    def split_key(self, content):
        return (content[0], content[1], *shift_class(content[2:]))

    def play(self, content, act, rng, probe=None):
        topic, pos, *cues = content
        ep = Episode(self.name, self.knob, content, self.key(content))
        ok = False
        for t, cue in enumerate(cues):
            feats = (
                0,
                self.f.id("cue", N_CUES, cue),
                self.f.id("topic", N_TOPICS, topic),
                self.f.id("marker", 2, int(t == pos)),
            )
            a = act(feats, self.A)
            if t == pos:
                ok = a == rule(cue, self.A)
            last = t == len(cues) - 1
            ep.steps.append(
                StepRecord([Decision(feats, self.A, a)], True, self.key(content, t + 1), float(ok and last), last)
            )
        return ep

    def blind_success(self) -> float:
        return 1.0 / self.A


class Subgoals(Task):
    """knob ordered sub-goals in 2 x knob turns. Each turn shows the next sub-goal's cue: its right action
    (one of 4) completes it, a wrong one is an invalid call (`tool_ok` false); a fifth action, "farm", is
    a valid call that completes nothing. The episode ends when every sub-goal is done (reward 1) or at the
    turn limit (reward 0); `outcome_level` is the number of sub-goals done. Ungated immediate rewards for
    valid calls (D-RA) pay for farming; G-RA's gate pays them only from level tau (2) on."""

    name = "subgoals"
    isolates = "ordered verifiable sub-goals, and a valid call that makes no progress"
    knob_name = "sub-goals"
    knobs = (2, 3, 4)
    built_for = ("gated",)

    A = 4

    def _declare(self) -> None:
        self.f.block("bias", 1), self.f.block("cue", N_CUES), self.f.block("topic", N_TOPICS)
        self.f.block("level", 8)

    @property
    def n_actions(self) -> int:
        return self.A + 1

    def all_contents(self):
        seqs = _sequences(self.knob, 4096, rng_seed=self.knob)
        return [(t, *s) for s in seqs for t in range(0, N_TOPICS, 4)]

    def split_key(self, content):
        return (content[0], *shift_class(content[1:]))

    def play(self, content, act, rng, probe=None):
        topic, *cues = content
        ep = Episode(self.name, self.knob, content, self.key(content, 0))
        level = 0
        horizon = 2 * self.knob
        for t in range(horizon):
            cue = cues[level]
            feats = (
                0,
                self.f.id("cue", N_CUES, cue),
                self.f.id("topic", N_TOPICS, topic),
                self.f.id("level", 8, level),
            )
            a = act(feats, self.A + 1)
            if a == self.A:  # farm: valid, no progress
                ok = True
            else:
                ok = a == rule(cue, self.A)
                level += ok
            done = level == self.knob or t == horizon - 1
            ep.steps.append(
                StepRecord(
                    [Decision(feats, self.A + 1, a)],
                    bool(ok),
                    self.key(content, level),
                    float(level == self.knob and done),
                    done,
                    level=level,
                )
            )
            if done:
                break
        return ep

    def blind_success(self) -> float:
        # blind: every turn an action drawn from one fixed distribution q over the 5; the sub-goals' right
        # actions are uniform over the 4 advances, so each turn completes one with probability
        # sum_a q_a / 4 <= 1/4: the best blind policy spreads over the 4 advances
        return _at_least(self.knob, 2 * self.knob, 0.25)


def _at_least(k: int, n: int, p: float) -> float:
    """P(at least k successes in n Bernoulli(p) trials)."""
    from math import comb

    return sum(comb(n, j) * p**j * (1 - p) ** (n - j) for j in range(k, n + 1))


class Info(Task):
    """A hidden secret of knob bits. knob question turns, each asking one of 2 x knob questions: question j <
    knob reveals bit j, the others reveal nothing; then the answer turn, one binary decision per bit. Reward 1
    for the whole secret. Each question's information gain is measurable as the rise in the policy's own
    probability of the secret (IGPO's turn reward)."""

    name = "info"
    isolates = "turns that reveal information about the answer"
    knob_name = "secret bits"
    knobs = (2, 3, 4)
    built_for = ("igpo",)

    def _declare(self) -> None:
        b = self.knob
        self.f.block("bias", 1), self.f.block("topic", N_TOPICS * 2)
        self.f.block("qstate", 3 * b)  # per bit: unknown / known 0 / known 1 (question turns)
        self.f.block("abias", 1)
        self.f.block("astate", 3 * b)  # the same, as the answer decisions see it

    @property
    def n_actions(self) -> int:
        return 2 * self.knob

    def all_contents(self):
        return [(s, t) for s in range(2**self.knob) for t in range(N_TOPICS * 2)]

    def split_key(self, content):
        return (content[1],)  # every secret of a topic in one split: the secrets are uniform in each

    def answer_features(self, bit: int, status: int) -> tuple[int, ...]:
        return (self.f.id("abias", 1, 0), self.f.id("astate", 3 * self.knob, 3 * bit + status))

    def play(self, content, act, rng, probe=None):
        secret, topic = content
        b = self.knob
        bits = [(secret >> j) & 1 for j in range(b)]
        status = [0] * b  # 0 unknown, 1 known 0, 2 known 1
        ep = Episode(self.name, self.knob, content, self.key(content, tuple(status)))
        for _ in range(b):
            p = probe(self, bits, status) if probe is not None else None
            feats = (
                0,
                self.f.id("topic", N_TOPICS * 2, topic),
                *(self.f.id("qstate", 3 * b, 3 * j + status[j]) for j in range(b)),
            )
            a = act(feats, 2 * b)
            if a < b:
                status[a] = 1 + bits[a]
            ep.steps.append(StepRecord([Decision(feats, 2 * b, a)], True, self.key(content, tuple(status)), probe=p))
        p = probe(self, bits, status) if probe is not None else None
        decisions = []
        for j in range(b):
            feats = self.answer_features(j, status[j])
            decisions.append(Decision(feats, 2, act(feats, 2)))
        ok = all(d.action == bit for d, bit in zip(decisions, bits))
        ep.steps.append(StepRecord(decisions, True, self.key(content, "answered"), float(ok), True, probe=p))
        return ep

    def blind_success(self) -> float:
        return 2.0**-self.knob


class Progress(Task):
    """knob steps, each showing a cue with 2 actions; a right action is one step of progress, a wrong one
    makes none; reward 1 only if every step was right. The per-step progress is attributable from the
    step's cue and action alone (SPA's estimator)."""

    name = "progress"
    isolates = "progress attributable to each step (all steps must be right)"
    knob_name = "steps"
    knobs = (2, 4, 6)
    built_for = ("spa",)

    A = 2

    def _declare(self) -> None:
        self.f.block("bias", 1), self.f.block("cue", N_CUES), self.f.block("topic", N_TOPICS)

    @property
    def n_actions(self) -> int:
        return self.A

    def all_contents(self):
        seqs = _sequences(self.knob, 4096, rng_seed=100 + self.knob)
        return [(t, *s) for s in seqs for t in range(0, N_TOPICS, 4)]

    def split_key(self, content):
        return (content[0], *shift_class(content[1:]))

    def play(self, content, act, rng, probe=None):
        topic, *cues = content
        ep = Episode(self.name, self.knob, content, self.key(content, 0, 0))
        right = 0
        for t, cue in enumerate(cues):
            feats = (0, self.f.id("cue", N_CUES, cue), self.f.id("topic", N_TOPICS, topic))
            a = act(feats, self.A)
            right += a == rule(cue, self.A)
            last = t == len(cues) - 1
            ep.steps.append(
                StepRecord(
                    [Decision(feats, self.A, a)],
                    True,
                    self.key(content, t + 1, right),
                    float(last and right == len(cues)),
                    last,
                )
            )
        return ep

    def blind_success(self) -> float:
        return self.A**-self.knob


class Recurring(Task):
    """A ladder of knob rungs climbed in 2 x knob turns: each rung shows its cue, the right one of 2 actions
    climbs, a wrong one falls back to the bottom, so the same states recur within and across the episodes
    of a group (GiGPO's step groups); reward 1 on reaching the top."""

    name = "recurring"
    isolates = "states that recur across the episodes of a group"
    knob_name = "rungs"
    knobs = (2, 4, 6)
    built_for = ("gigpo",)

    A = 2

    def _declare(self) -> None:
        self.f.block("bias", 1), self.f.block("cue", N_CUES), self.f.block("topic", N_TOPICS)

    @property
    def n_actions(self) -> int:
        return self.A

    def all_contents(self):
        seqs = _sequences(self.knob, 4096, rng_seed=200 + self.knob)
        return [(t, *s) for s in seqs for t in range(0, N_TOPICS, 4)]

    def split_key(self, content):
        return (content[0], *shift_class(content[1:]))

    def play(self, content, act, rng, probe=None):
        topic, *cues = content
        ep = Episode(self.name, self.knob, content, self.key(content, 0))
        rung = 0
        horizon = 2 * self.knob
        for t in range(horizon):
            feats = (0, self.f.id("cue", N_CUES, cues[rung]), self.f.id("topic", N_TOPICS, topic))
            a = act(feats, self.A)
            rung = rung + 1 if a == rule(cues[rung], self.A) else 0
            done = rung == self.knob or t == horizon - 1
            ep.steps.append(
                StepRecord([Decision(feats, self.A, a)], True, self.key(content, rung), float(rung == self.knob), done)
            )
            if done:
                break
        return ep

    def blind_success(self) -> float:
        # blind: each turn right with probability 1/2 whatever the rung; P(knob rights in a row within 2 knob)
        n, k = 2 * self.knob, self.knob
        # dynamic programme over (turn, rung)
        dist = np.zeros(k + 1)
        dist[0] = 1.0
        for _ in range(n):
            new = np.zeros(k + 1)
            new[k] = dist[k]
            for r in range(k):
                new[r + 1] += dist[r] / 2
                new[0] += dist[r] / 2
            dist = new
        return float(dist[k])


TASKS: dict[str, type[Task]] = {t.name: t for t in (Control, Delay, Distractors, Subgoals, Info, Progress, Recurring)}
"""Every diagnostic task, by name."""


def make_task(name: str, knob: int) -> Task:
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; choose one of {', '.join(TASKS)}")
    return TASKS[name](knob)
