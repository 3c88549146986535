"""The policy's forward pass for an update: logprobs (and entropy) of the trained tokens only.

A causal LM's head projects every position onto the vocabulary, prompt and observations included,
although an update reads only the completion tokens. `masked_logprobs` runs the model's body, keeps
the hidden states that predict a trained token, and applies the LM head and the log-softmax to those
rows alone: the (B, T, V) logits tensor is never built. Models whose head is not a plain projection
(logit soft-capping or scaling) take the full forward pass, then keep the same rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

# Model types whose logits are exactly `lm_head(last_hidden_state)` (checked against transformers'
# modeling code: no soft-capping, scaling or bias after the head).
_PLAIN_HEAD_TYPES = frozenset({"qwen2", "qwen3", "llama", "mistral"})


@dataclass(frozen=True)
class MaskedForward:
    """Per-token results, shape (B, T), zero where `mask` is 0.

    Attributes:
        logp: log pi(x_t | x_<t) of every trained token (with gradient when the model has one).
        entropy: the entropy of the distribution token t was sampled from; its graph is kept only
            when asked for (an entropy bonus), otherwise it is a detached diagnostic.
    """

    logp: torch.Tensor
    entropy: torch.Tensor


def _plain_head(model: Any) -> tuple[Any, Any] | None:
    """(body, head) when the model's logits are `head(body(...).last_hidden_state)`, else None."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model  # peft wraps the model
    config = getattr(base, "config", None)
    if getattr(config, "model_type", None) not in _PLAIN_HEAD_TYPES:
        return None
    get_decoder, get_head = getattr(base, "get_decoder", None), getattr(base, "get_output_embeddings", None)
    if get_decoder is None or get_head is None:
        return None
    body, head = get_decoder(), get_head()
    if body is None or head is None or getattr(head, "bias", None) is not None:
        return None
    return body, head


def masked_logprobs(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    mask: torch.Tensor,
    entropy_grad: bool = False,
    lean: bool = True,
) -> MaskedForward:
    """Logprobs and entropies of the tokens where `mask` > 0 (position 0 is never trained).

    Args:
        model: a Hugging Face causal LM (or a peft-wrapped one).
        input_ids, attention_mask: (B, T).
        mask: (B, T); the positions whose logprob is needed (the loss mask).
        entropy_grad: keep the entropy's autograd graph (only an entropy bonus needs it).
        lean: project only the needed hidden states onto the vocabulary; False always runs the full
            head (the reference the lean path is tested against).
    """
    targets = mask[:, 1:] > 0  # token t is predicted from position t - 1
    parts = _plain_head(model) if lean else None
    if parts is not None:
        body, head = parts
        hidden = body(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        logits = head(hidden[:, :-1][targets])  # (N, V)
    else:
        logits = model(input_ids=input_ids, attention_mask=attention_mask).logits[:, :-1][targets]
    logp_all = torch.log_softmax(logits.float(), dim=-1)
    picked = logp_all.gather(-1, input_ids[:, 1:][targets][:, None]).squeeze(-1)
    if entropy_grad:
        ent = -(logp_all.exp() * logp_all).sum(-1)
    else:
        with torch.no_grad():
            ent = -(logp_all.exp() * logp_all).sum(-1)
    return MaskedForward(_scatter(picked, targets), _scatter(ent, targets))


class MaskedPolicy(torch.nn.Module):
    """`masked_logprobs` of `model` as a module, returning (logp, entropy): what DDP wraps, since
    DDP averages the gradients of the passes that run through its own forward."""

    def __init__(self, model: Any, lean: bool = True):
        super().__init__()
        self.model, self.lean = model, lean

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, mask: torch.Tensor, entropy_grad: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor]:
        out = masked_logprobs(self.model, input_ids, attention_mask, mask, entropy_grad=entropy_grad, lean=self.lean)
        return out.logp, out.entropy


def _scatter(values: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Place the N selected values back at their (B, T) positions (shifted by one), zeros elsewhere."""
    out = torch.zeros(targets.shape, dtype=values.dtype, device=values.device).masked_scatter(targets, values)
    return torch.nn.functional.pad(out, (1, 0), value=0.0)
