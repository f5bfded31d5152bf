"""Autoregressive generation: prefill the prompt once, then decode one token at a time.

With `use_cache=True` the keys and values of every layer are kept in a `KVCache` (n_kv_heads heads,
so GQA/MQA caches are n_heads/n_kv_heads times smaller) and each step runs the model on the one new
token only. With `use_cache=False` every step recomputes the whole sequence, the reference that the
cached path must reproduce (tests/model/test_generate.py). The step scheme is the usual one of
GPT-2 / Llama inference loops (e.g. nanoGPT `generate`, HF `generate` with `past_key_values`).

Shapes in comments: B batch, T prompt length, N new tokens, V vocab.
"""

from __future__ import annotations

import torch
from torch import nn

from depthwidth.model.cache import KVCache


def model_dtype(model: nn.Module) -> torch.dtype:
    """Floating dtype of the activations: that of the token embedding (Linear layers may be
    int8-quantized, the embedding never is)."""
    return model.embed.weight.dtype


def new_cache(model: nn.Module, *, batch_size: int, max_len: int) -> KVCache:
    """An empty cache for `model` in its activation dtype, on its device."""
    weight = model.embed.weight
    return KVCache(model.shape, batch_size=batch_size, max_len=max_len, dtype=weight.dtype, device=weight.device)


def _next_token(
    logits: torch.Tensor,  # (B, V) logits of the last position
    *,
    greedy: bool,
    temperature: float,
    generator: torch.Generator | None,
) -> torch.Tensor:  # (B, 1)
    if greedy:
        return logits.argmax(dim=-1, keepdim=True)
    probs = torch.softmax(logits.float() / temperature, dim=-1)  # (B, V)
    return torch.multinomial(probs, num_samples=1, generator=generator)


@torch.inference_mode()
def generate(
    model: nn.Module,
    idx: torch.Tensor,  # (B, T) prompt token ids
    *,
    max_new_tokens: int,
    use_cache: bool = True,
    greedy: bool = True,
    temperature: float = 1.0,
    generator: torch.Generator | None = None,
    return_logits: bool = False,
    cache: KVCache | None = None,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Continue `idx` by `max_new_tokens` tokens.

    Returns the tokens (B, T + N), prompt included; with `return_logits=True` also the logits that
    chose each new token, (B, N, V), in the model's dtype. `greedy=False` samples from
    softmax(logits / temperature) with `generator`. Raises ValueError when the prompt plus the new
    tokens do not fit the model's `max_seq_len` (its position table). `cache` (with `use_cache`)
    is an empty `KVCache` to fill instead of a new one, so a caller can inspect it afterwards.
    """
    shape = model.shape
    if idx.dim() != 2 or idx.shape[1] < 1:
        raise ValueError(f"idx must be a (batch, prompt_len) tensor with prompt_len >= 1, got {tuple(idx.shape)}")
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 0:
        raise ValueError(f"max_new_tokens={max_new_tokens!r} must be a non-negative integer")
    if not temperature > 0:
        raise ValueError(f"temperature={temperature!r} must be positive")
    if not shape.causal or not shape.lm_head:
        raise ValueError(
            f"generation needs a causal decoder with an LM head (kind={shape.kind!r}, lm_head={shape.lm_head})"
        )
    B, T = idx.shape
    total = T + max_new_tokens
    if total > shape.max_seq_len:
        raise ValueError(
            f"prompt of {T} tokens + max_new_tokens={max_new_tokens} = {total} exceeds "
            f"max_seq_len={shape.max_seq_len} of this model"
        )
    was_training = model.training
    model.eval()
    try:
        tokens = idx
        chosen: list[torch.Tensor] = []
        if max_new_tokens == 0:
            empty = idx.new_zeros((B, 0, shape.vocab_size), dtype=model_dtype(model))  # (B, 0, V)
            return (tokens, empty) if return_logits else tokens
        if use_cache:
            if cache is None:
                cache = new_cache(model, batch_size=B, max_len=total - 1)
            elif cache.length != 0 or cache.max_len < total - 1 or cache.keys[0].shape[0] != B:
                raise ValueError(
                    f"cache must be empty, for batch {B} and hold {total - 1} tokens; it has "
                    f"length={cache.length}, max_len={cache.max_len}, batch {cache.keys[0].shape[0]}"
                )
            logits, _ = model(idx, cache=cache)  # prefill: (B, T, V)
            step_input = None
            for i in range(max_new_tokens):
                if step_input is not None:
                    logits, _ = model(step_input, cache=cache)  # (B, 1, V)
                last = logits[:, -1, :]  # (B, V)
                step_input = _next_token(last, greedy=greedy, temperature=temperature, generator=generator)
                chosen.append(last)
                tokens = torch.cat([tokens, step_input], dim=1)
        else:
            for _ in range(max_new_tokens):
                logits, _ = model(tokens)  # (B, T+i, V): the whole sequence again
                last = logits[:, -1, :]
                nxt = _next_token(last, greedy=greedy, temperature=temperature, generator=generator)
                chosen.append(last)
                tokens = torch.cat([tokens, nxt], dim=1)
        if return_logits:
            return tokens, torch.stack(chosen, dim=1)  # (B, N, V)
        return tokens
    finally:
        model.train(was_training)


__all__ = ["generate", "model_dtype", "new_cache"]
