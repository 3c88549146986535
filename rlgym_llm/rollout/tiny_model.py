"""A tiny causal LM built entirely in code: byte-level BPE tokenizer + Qwen2 config, a few M params.

Nothing is downloaded: the tokenizer is trained with `tokenizers` on a synthetic corpus generated
from a fixed seed, and the weights are a seeded random init. The result is saved as a normal Hugging
Face folder (config, safetensors, tokenizer.json, chat template) that transformers and vLLM load.

    path = build_tiny_model()            # cached under ~/.cache/rlgym_llm/models/
    model = AutoModelForCausalLM.from_pretrained(path)
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from rlgym_llm.core.errors import MissingDependencyError
from rlgym_llm.rollout.chat_template import CHATML_TOOLS_TEMPLATE

logger = logging.getLogger(__name__)

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
# Frequent multi-character pieces of tool-calling transcripts get their own tokens, so the tiny model
# emits a tool call in a handful of steps.
ADDED_PIECES = ("<tool_call>", "</tool_call>", '{"name": "', '", "arguments": {', "}}</tool_call>")

_WORDS = (
    "the a an of to in and or is are was be what which who where when how many much number answer "
    "question compute calculate find value total each per more less than sum difference product ratio "
    "apples books coins cards marbles pens boxes bags students teachers people cars trees tickets miles "
    "hours minutes days weeks price cost buys sells gives takes has have had left remaining equal equals "
    "solve for x y fraction simplify result tool call search open document city person organisation "
    "company founded born works at headquartered event held year settings mail shop file folder click "
    "type select scroll back done dark mode font size send subject quantity shipping move into error "
    "invalid unknown missing correct incorrect please try again submit calculator expression true false "
    "test tests passed failed def return if else for while import print list dict str int float none"
).split()
_TOOLS = ("calculator", "submit_answer", "search", "open", "answer", "click", "type", "select", "run_tests")
_ARGS = ("expression", "answer", "query", "doc_id", "text", "id", "option", "k")


@dataclass(frozen=True)
class TinyModelConfig:
    """Shape of the tiny model. The defaults give ~3.3M parameters."""

    vocab_size: int = 4096
    hidden_size: int = 256
    num_hidden_layers: int = 4
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    intermediate_size: int = 688
    max_position_embeddings: int = 2048
    corpus_lines: int = 20_000
    seed: int = 0

    def key(self) -> str:
        """A short hash of everything that shapes the artefact; a new key means a new folder."""
        blob = json.dumps({**asdict(self), "template": CHATML_TOOLS_TEMPLATE, "v": 1}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]


def _synthetic_corpus(n_lines: int, seed: int) -> list[str]:
    """Chat-, math- and tool-call-shaped text drawn from a fixed seed (deterministic everywhere)."""
    rng = np.random.default_rng(seed)
    ops = ["+", "-", "*", "/", "**", "(", ")", "=", ".", ",", "?", ":"]
    lines = []
    for _ in range(n_lines):
        kind = rng.integers(4)
        if kind == 0:  # prose with numbers
            words = [str(rng.choice(_WORDS)) for _ in range(int(rng.integers(5, 20)))]
            for i in rng.integers(0, len(words), size=2):
                words[int(i)] = str(int(rng.integers(0, 1000)))
            lines.append(" ".join(words).capitalize() + "?")
        elif kind == 1:  # arithmetic
            terms = [str(int(rng.integers(0, 100))) for _ in range(int(rng.integers(2, 5)))]
            expr = "".join(t + str(rng.choice(ops[:4])) for t in terms[:-1]) + terms[-1]
            lines.append(f"{expr} = {int(rng.integers(-500, 500))}")
        elif kind == 2:  # a tool call
            name, arg = str(rng.choice(_TOOLS)), str(rng.choice(_ARGS))
            value = str(int(rng.integers(0, 1000))) if rng.random() < 0.5 else str(rng.choice(_WORDS))
            lines.append(f'<tool_call>{{"name": "{name}", "arguments": {{"{arg}": "{value}"}}}}</tool_call>')
        else:  # chat markup
            role = str(rng.choice(["system", "user", "assistant", "tool"]))
            text = " ".join(str(rng.choice(_WORDS)) for _ in range(int(rng.integers(3, 12))))
            lines.append(f"<|im_start|>{role}\n{text}<|im_end|>")
    return lines


def _train_tokenizer(cfg: TinyModelConfig):
    try:
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
        from transformers import PreTrainedTokenizerFast
    except ImportError as e:
        raise MissingDependencyError.of(e, "the tiny model", default="transformers") from e

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=cfg.vocab_size - len(ADDED_PIECES),
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        min_frequency=2,
        show_progress=False,
    )
    tok.train_from_iterator(_synthetic_corpus(cfg.corpus_lines, cfg.seed), trainer=trainer)
    tok.add_tokens(list(ADDED_PIECES))
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=None,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token=None,
        chat_template=CHATML_TOOLS_TEMPLATE,
        clean_up_tokenization_spaces=False,
        model_max_length=cfg.max_position_embeddings,
    )


def default_cache_dir() -> Path:
    return Path(os.environ.get("RLGYM_CACHE", Path.home() / ".cache" / "rlgym_llm"))


def build_tiny_model(path: str | os.PathLike | None = None, config: TinyModelConfig | None = None) -> Path:
    """Build (or reuse) the tiny model and return its Hugging Face folder.

    Args:
        path: where to save it; default `<cache>/models/tiny-qwen2-<key>`.
        config: the model's shape and the tokenizer's corpus.

    Returns:
        The folder, loadable with `AutoModelForCausalLM.from_pretrained` / `AutoTokenizer`.
    """
    cfg = config or TinyModelConfig()
    out = Path(path) if path is not None else default_cache_dir() / "models" / f"tiny-qwen2-{cfg.key()}"
    if (out / "rlgym_tiny.json").exists():
        return out
    try:
        import torch
        from transformers import Qwen2Config, Qwen2ForCausalLM
    except ImportError as e:
        raise MissingDependencyError.of(e, "the tiny model", default="torch") from e

    tokenizer = _train_tokenizer(cfg)
    # The model's vocab is the tokenizer's real size: a larger one would sample undecodable ids.
    model_cfg = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=cfg.hidden_size,
        intermediate_size=cfg.intermediate_size,
        num_hidden_layers=cfg.num_hidden_layers,
        num_attention_heads=cfg.num_attention_heads,
        num_key_value_heads=cfg.num_key_value_heads,
        max_position_embeddings=cfg.max_position_embeddings,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        dtype="float32",
    )
    with torch.random.fork_rng():
        torch.manual_seed(cfg.seed)
        model = Qwen2ForCausalLM(model_cfg)
    tmp = out.with_name(out.name + f".tmp{os.getpid()}")
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    model.generation_config.save_pretrained(tmp)
    (tmp / "rlgym_tiny.json").write_text(json.dumps({**asdict(cfg), "key": cfg.key()}, indent=2))
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        tmp.rename(out)  # atomic: concurrent builders never see a half-written folder
    except OSError:
        if not (out / "rlgym_tiny.json").exists():
            raise
    n_params = sum(p.numel() for p in model.parameters())
    logger.info("built tiny model (%.1fM params, vocab %d) at %s", n_params / 1e6, len(tokenizer), out)
    return out
