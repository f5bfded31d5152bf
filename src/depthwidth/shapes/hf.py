"""Hugging Face `config.json` (already parsed into a dict) -> `Shape`. Pure: no file I/O here;
`depthwidth.hfconfig.from_hf_config` reads the file and calls `shape_from_hf_config`.

Supported `model_type`s and the fields read (names as in transformers' configuration classes):
    gpt2      n_layer, n_embd, n_head, vocab_size, n_positions (or n_ctx), n_inner, activation_function,
              layer_norm_epsilon, tie_word_embeddings          -> learned positions, biases, LayerNorm
    llama     num_hidden_layers, hidden_size, num_attention_heads, num_key_value_heads, head_dim,
    mistral   intermediate_size, vocab_size, max_position_embeddings, rope_theta, rms_norm_eps,
    qwen2     tie_word_embeddings, hidden_act, attention_bias / mlp_bias (llama)
                                                                -> RoPE, RMSNorm, SwiGLU; biases: none
                                                                   (llama, mistral), q/k/v (qwen2)
    gpt_neox  num_hidden_layers, hidden_size, num_attention_heads, intermediate_size, vocab_size,
              max_position_embeddings, rotary_emb_base (or rope_theta), layer_norm_eps,
              use_parallel_residual, tie_word_embeddings, attention_bias, hidden_act
                                                                -> RoPE, LayerNorm with bias, biases
The size fields are required; the others default as in transformers' configuration classes.
Fields that change no parameter count (rope_scaling, sliding_window, rotary_pct, dropout) are ignored.
"""

from __future__ import annotations

import math
from typing import Any

from depthwidth.errors import UserError
from depthwidth.shapes.checks import shown
from depthwidth.shapes.shape import Shape

SUPPORTED_MODEL_TYPES = ("gpt2", "gpt_neox", "llama", "mistral", "qwen2")

_MISSING = object()


class _Reader:
    """Reads typed fields from one config dict; every error names the source and the field."""

    def __init__(self, config: dict[str, Any], *, source: str, model_type: str) -> None:
        self.config, self.source, self.model_type = config, source, model_type

    def error(self, message: str) -> ValueError:
        return UserError(f"{self.source}: {message}")

    def _get(self, names: tuple[str, ...], default: Any) -> tuple[str, Any]:
        for name in names:
            if name in self.config and self.config[name] is not None:
                return name, self.config[name]
        if default is _MISSING:
            alt = " (or " + ", ".join(repr(n) for n in names[1:]) + ")" if len(names) > 1 else ""
            raise self.error(f"missing field {names[0]!r}{alt}, required for model_type {self.model_type!r}")
        return names[0], default

    def int(self, *names: str, default: Any = _MISSING) -> int | None:
        name, value = self._get(names, default)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise self.error(f"field {name!r} = {shown(value)} must be a positive integer")
        return value

    def float(self, *names: str, default: Any = _MISSING) -> float:
        name, value = self._get(names, default)
        # an int beyond float's range compares below inf but does not convert: finite as a float is the test
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value or \
                (isinstance(value, int) and value.bit_length() > 1023) or not float(value) < math.inf:
            raise self.error(f"field {name!r} = {shown(value)} must be a positive, finite number")
        return float(value)

    def bool(self, name: str, *, default: bool) -> bool:
        _, value = self._get((name,), default)
        if not isinstance(value, bool):
            raise self.error(f"field {name!r} = {shown(value)} must be true or false")
        return value

    def str(self, name: str, *, default: str) -> str:
        _, value = self._get((name,), default)
        if not isinstance(value, str):
            raise self.error(f"field {name!r} = {shown(value)} must be a string")
        return value


def _gelu_or_relu(r: _Reader, name: str, *, default: str) -> str:
    act = r.str(name, default=default)
    if act.startswith("gelu"):  # gelu, gelu_new, gelu_fast, gelu_pytorch_tanh: same parameters and FLOPs
        return "gelu"
    if act == "relu":
        return "relu"
    raise r.error(f"field {name!r} = {shown(act)} is not supported; expected a gelu variant or relu")


def _rope_theta(r: _Reader, *names: str, default: float) -> float:
    params = r.config.get("rope_parameters")  # newer transformers nest it here
    if isinstance(params, dict) and "rope_theta" in params and not any(n in r.config for n in names):
        return _Reader(params, source=r.source, model_type=r.model_type).float("rope_theta")
    return r.float(*names, default=default)


def _gpt2(r: _Reader) -> dict[str, Any]:
    return dict(
        n_layers=r.int("n_layer"),
        d_model=r.int("n_embd"),
        n_heads=r.int("n_head"),
        vocab_size=r.int("vocab_size"),
        max_seq_len=r.int("n_positions", "n_ctx"),
        d_ff=r.int("n_inner", default=None),
        ffn=_gelu_or_relu(r, "activation_function", default="gelu_new"),
        norm="layernorm",
        bias="all",
        pos="learned",
        norm_eps=r.float("layer_norm_epsilon", default=1e-5),
        tie_embeddings=r.bool("tie_word_embeddings", default=True),
    )


def _llama_like(r: _Reader, *, default_ctx: int, bias: str) -> dict[str, Any]:
    act = r.str("hidden_act", default="silu")
    if act not in ("silu", "swish"):
        raise r.error(f"field 'hidden_act' = {shown(act)} is not supported; the gated MLP needs 'silu' (SwiGLU)")
    return dict(
        n_layers=r.int("num_hidden_layers"),
        d_model=r.int("hidden_size"),
        n_heads=r.int("num_attention_heads"),
        n_kv_heads=r.int("num_key_value_heads", default=None),
        head_dim=r.int("head_dim", default=None),
        d_ff=r.int("intermediate_size"),
        vocab_size=r.int("vocab_size"),
        max_seq_len=r.int("max_position_embeddings", default=default_ctx),
        rope_theta=_rope_theta(r, "rope_theta", default=10000.0),
        norm_eps=r.float("rms_norm_eps", default=1e-6),
        tie_embeddings=r.bool("tie_word_embeddings", default=False),
        ffn="swiglu",
        norm="rmsnorm",
        pos="rope",
        bias=bias,
    )


def _llama(r: _Reader) -> dict[str, Any]:
    attn_bias = r.bool("attention_bias", default=False)
    mlp_bias = r.bool("mlp_bias", default=False)
    if attn_bias != mlp_bias:
        raise r.error(
            f"attention_bias={str(attn_bias).lower()} with mlp_bias={str(mlp_bias).lower()} is not supported; "
            "Shape.bias covers none, all (both true) and qkv (qwen2)"
        )
    return _llama_like(r, default_ctx=2048, bias="all" if attn_bias else "none")


def _gpt_neox(r: _Reader) -> dict[str, Any]:
    if not r.bool("attention_bias", default=True):
        raise r.error("attention_bias=false is not supported for gpt_neox (its MLP and norms keep their biases)")
    return dict(
        n_layers=r.int("num_hidden_layers"),
        d_model=r.int("hidden_size"),
        n_heads=r.int("num_attention_heads"),
        d_ff=r.int("intermediate_size"),
        vocab_size=r.int("vocab_size"),
        max_seq_len=r.int("max_position_embeddings", default=2048),
        rope_theta=_rope_theta(r, "rotary_emb_base", "rope_theta", default=10000.0),
        norm_eps=r.float("layer_norm_eps", default=1e-5),
        parallel_residual=r.bool("use_parallel_residual", default=True),
        tie_embeddings=r.bool("tie_word_embeddings", default=False),
        ffn=_gelu_or_relu(r, "hidden_act", default="gelu"),
        norm="layernorm",
        bias="all",
        pos="rope",
    )


_BUILDERS = {
    "gpt2": _gpt2,
    "llama": _llama,
    "mistral": lambda r: _llama_like(r, default_ctx=4096 * 32, bias="none"),
    "qwen2": lambda r: _llama_like(r, default_ctx=32768, bias="qkv"),
    "gpt_neox": _gpt_neox,
}


def shape_from_hf_config(config: dict[str, Any], *, source: str = "<dict>") -> Shape:
    """The Shape of a Hugging Face model config (the parsed `config.json`).

    `source` names the file in error messages. Raises ValueError naming the source, the field and
    what is expected: unknown or missing `model_type`, missing size fields, wrong types, or
    combinations `Shape` cannot represent.
    """
    if not isinstance(config, dict):
        raise UserError(f"{source}: expected a JSON object (a config dict), got {type(config).__name__}")
    supported = ", ".join(SUPPORTED_MODEL_TYPES)
    model_type = config.get("model_type")
    if model_type is None:
        raise UserError(f"{source}: missing field 'model_type'; supported model types: {supported}")
    if not isinstance(model_type, str):
        raise UserError(f"{source}: field 'model_type' = {shown(model_type)} must be a string; "
                        f"supported model types: {supported}")
    if model_type not in _BUILDERS:
        raise UserError(f"{source}: model_type {shown(model_type)} is not supported; supported model types: "
                        f"{supported}")
    reader = _Reader(config, source=source, model_type=model_type)
    fields = _BUILDERS[model_type](reader)
    try:
        return Shape(**fields)
    except ValueError as exc:
        raise UserError(f"{source}: {exc} (read from the {model_type} config fields)") from None


__all__ = ["SUPPORTED_MODEL_TYPES", "shape_from_hf_config"]
