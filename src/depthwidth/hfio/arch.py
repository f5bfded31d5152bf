"""Which Hugging Face class holds a `Shape` exactly, and the `config.json` that says so.

The class is chosen by the option that only one family has, then every other option is checked
against what that class can hold:

    ffn="swiglu"                 -> LlamaForCausalLM (bias "none" or "all": attention_bias = mlp_bias),
                                    Qwen2ForCausalLM (bias "qkv"); needs norm="rmsnorm", pos="rope"
    pos="learned" (GELU / ReLU)  -> GPT2LMHeadModel; needs norm="layernorm", one K/V head per query head,
                                    head_dim = d_model / n_heads, no parallel residual
    pos="rope" (GELU / ReLU)     -> GPTNeoXForCausalLM (use_parallel_residual as the shape says,
                                    rotary_pct 1); needs norm="layernorm", the same head rules as GPT-2
Every class needs a causal decoder with an LM head, pre-norm blocks and a final norm. A shape that
fails a rule is refused with one line naming the option (`UserError`); nothing is exported
approximately. GPT-2 and GPT-NeoX always have biases (GPT-NeoX's MLP and norms, GPT-2 everywhere):
a shape with fewer biases is held there with those biases zero, which computes the same function;
`config.json` then records our shape under the key "depthwidth" so that an import of the untouched
export gets the bias-free shape back (`depthwidth.hfio.load`).

GELU is the tanh approximation in our model, written as "gelu_pytorch_tanh" (`F.gelu(approximate=
"tanh")` in transformers). `import_mismatches` lists what in a foreign config our model would compute
differently (an erf GELU, partial rotary, RoPE scaling, ...), for the callers that need an exact import.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from depthwidth import __version__
from depthwidth.errors import UserError
from depthwidth.shapes.checks import shown
from depthwidth.shapes.shape import Shape


@dataclass(frozen=True, kw_only=True, slots=True)
class Arch:
    """One Hugging Face causal-LM class: its `model_type`, class name and the shape it holds."""

    model_type: str
    class_name: str
    hf_shape: Shape  # the shape as that class holds it (biases it always has filled in)


#: model_type -> the class that loads it (`architectures` in config.json)
CLASSES = {"gpt2": "GPT2LMHeadModel", "gpt_neox": "GPTNeoXForCausalLM", "llama": "LlamaForCausalLM",
           "qwen2": "Qwen2ForCausalLM", "mistral": "MistralForCausalLM"}
#: activation names of transformers that compute our tanh GELU (the same formula)
TANH_GELU = ("gelu_pytorch_tanh", "gelu_new", "gelu_fast", "gelu_accurate")
_REFUSE = "no Hugging Face class holds this shape exactly"
CONFIG_NAME = "config.json"


def _need(shape: Shape, option: str, wanted: Any, *, cls: str, why: str) -> None:
    value = getattr(shape, option)
    if value != wanted:
        raise UserError(f"cannot export {shape.label()}: {option}={value!r}; {cls} (chosen for {why}) needs "
                        f"{option}={wanted!r}, and {_REFUSE}")


def _common(shape: Shape) -> None:
    for option, wanted in (("kind", "decoder"), ("lm_head", True), ("norm_position", "pre"), ("final_norm", True)):
        if getattr(shape, option) != wanted:
            raise UserError(f"cannot export {shape.label()}: {option}={getattr(shape, option)!r}; every Hugging "
                            f"Face causal LM needs {option}={wanted!r}, and {_REFUSE}")
    if shape.pos == "none":
        raise UserError(f"cannot export {shape.label()}: pos='none'; GPT-2 has learned positions, Llama and "
                        f"GPT-NeoX rotary ones, and {_REFUSE}")


def _one_kv_head_per_head(shape: Shape, *, cls: str, why: str) -> None:
    _need(shape, "n_kv_heads", shape.n_heads, cls=cls, why=why)
    if shape.head_dim * shape.n_heads != shape.d_model:
        raise UserError(f"cannot export {shape.label()}: head_dim={shape.head_dim}; {cls} (chosen for {why}) "
                        f"needs head_dim = d_model / n_heads = {shape.d_model / shape.n_heads:g}, and {_REFUSE}")


def choose_arch(shape: Shape) -> Arch:
    """The class that holds `shape` exactly (see the module docstring), or a UserError naming the option."""
    _common(shape)
    if shape.ffn == "swiglu":
        cls, why = "LlamaForCausalLM", "ffn='swiglu'"
        _need(shape, "norm", "rmsnorm", cls=cls, why=why)
        _need(shape, "pos", "rope", cls=cls, why=why)
        _need(shape, "parallel_residual", False, cls=cls, why=why)
        model_type = "qwen2" if shape.bias == "qkv" else "llama"
        return Arch(model_type=model_type, class_name=CLASSES[model_type], hf_shape=shape)
    if shape.pos == "learned":
        cls, why = "GPT2LMHeadModel", "pos='learned'"
        _need(shape, "norm", "layernorm", cls=cls, why=why)
        _need(shape, "parallel_residual", False, cls=cls, why=why)
        _one_kv_head_per_head(shape, cls=cls, why=why)
        return Arch(model_type="gpt2", class_name=CLASSES["gpt2"], hf_shape=shape.with_(bias="all"))
    cls, why = "GPTNeoXForCausalLM", f"pos='rope' with ffn={shape.ffn!r}"
    _need(shape, "norm", "layernorm", cls=cls, why=why)
    _one_kv_head_per_head(shape, cls=cls, why=why)
    return Arch(model_type="gpt_neox", class_name=CLASSES["gpt_neox"], hf_shape=shape.with_(bias="all"))


def _activation(shape: Shape) -> str:
    return {"gelu": "gelu_pytorch_tanh", "relu": "relu", "swiglu": "silu"}[shape.ffn]


def _rope(shape: Shape, **extra: Any) -> dict[str, Any]:
    return {"rope_type": "default", "rope_theta": shape.rope_theta, **extra}


def _gpt2(s: Shape, dropout: float) -> dict[str, Any]:
    return {"n_layer": s.n_layers, "n_embd": s.d_model, "n_head": s.n_heads, "n_inner": s.d_ff,
            "n_positions": s.max_seq_len, "n_ctx": s.max_seq_len, "activation_function": _activation(s),
            "layer_norm_epsilon": s.norm_eps, "scale_attn_weights": True, "scale_attn_by_inverse_layer_idx": False,
            "reorder_and_upcast_attn": False, "resid_pdrop": dropout, "embd_pdrop": dropout, "attn_pdrop": dropout}


def _gpt_neox(s: Shape, dropout: float) -> dict[str, Any]:
    return {"num_hidden_layers": s.n_layers, "hidden_size": s.d_model, "num_attention_heads": s.n_heads,
            "intermediate_size": s.d_ff, "max_position_embeddings": s.max_seq_len, "hidden_act": _activation(s),
            "layer_norm_eps": s.norm_eps, "use_parallel_residual": s.parallel_residual, "attention_bias": True,
            "rotary_pct": 1.0, "rotary_emb_base": s.rope_theta,
            "rope_parameters": _rope(s, partial_rotary_factor=1.0),
            "attention_dropout": dropout, "hidden_dropout": dropout}


def _llama(s: Shape, dropout: float) -> dict[str, Any]:
    out = {"num_hidden_layers": s.n_layers, "hidden_size": s.d_model, "num_attention_heads": s.n_heads,
           "num_key_value_heads": s.n_kv_heads, "head_dim": s.head_dim, "intermediate_size": s.d_ff,
           "max_position_embeddings": s.max_seq_len, "hidden_act": "silu", "rms_norm_eps": s.norm_eps,
           "rope_theta": s.rope_theta, "rope_parameters": _rope(s), "attention_dropout": dropout}
    if s.bias != "qkv":
        out |= {"attention_bias": s.bias == "all", "mlp_bias": s.bias == "all"}
    else:
        out |= {"use_sliding_window": False, "sliding_window": None}
    return out


_CONFIGS = {"gpt2": _gpt2, "gpt_neox": _gpt_neox, "llama": _llama, "qwen2": _llama}


def hf_config(shape: Shape, *, dropout: float = 0.0, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The `config.json` of `shape` in its class (`choose_arch`), fp32 weights, no special tokens. Our
    shape and `extra` (what the export records: run, tokenizer) are kept under the key "depthwidth"."""
    arch = choose_arch(shape)
    return {
        "architectures": [arch.class_name],
        "model_type": arch.model_type,
        "vocab_size": shape.vocab_size,
        **_CONFIGS[arch.model_type](shape, dropout),
        "tie_word_embeddings": shape.tie_embeddings,
        "bos_token_id": None,
        "eos_token_id": None,
        "pad_token_id": None,
        "use_cache": True,
        "torch_dtype": "float32",
        "initializer_range": 0.02,
        "depthwidth": {"version": __version__, "shape": shape.to_dict(), **(extra or {})},
    }


def _partial_rotary(config: dict[str, Any], *, source: str) -> float:
    params = config.get("rope_parameters") if isinstance(config.get("rope_parameters"), dict) else {}
    for name, value in (("rope_parameters.partial_rotary_factor", params.get("partial_rotary_factor")),
                        ("partial_rotary_factor", config.get("partial_rotary_factor")),
                        ("rotary_pct", config.get("rotary_pct"))):
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise UserError(f"{source}: field {name!r} = {shown(value)} must be a number (the fraction of each "
                                "head that is rotated)")
            return float(value)
    return 0.25 if config.get("model_type") == "gpt_neox" else 1.0  # transformers' defaults


def _rope_kind(config: dict[str, Any]) -> Any:
    params = config.get("rope_parameters") if isinstance(config.get("rope_parameters"), dict) else {}
    if params.get("rope_type") is not None:
        return params["rope_type"]
    scaling = config.get("rope_scaling")
    if isinstance(scaling, dict):
        return scaling.get("rope_type") or scaling.get("type")
    return scaling or None  # anything else that is set scales in some way


def import_mismatches(config: dict[str, Any], *, source: str = CONFIG_NAME) -> list[str]:
    """What our model of this config's shape would compute differently from its Hugging Face class,
    one 'field=value (why)' each (values from the file cut short); empty when the import is exact."""
    out = []
    act_field = "activation_function" if config.get("model_type") == "gpt2" else "hidden_act"
    act = config.get(act_field, "gelu_new" if act_field == "activation_function" else None)
    if isinstance(act, str) and act.startswith("gelu") and act not in TANH_GELU:
        out.append(f"{act_field}={shown(act)} (our GELU is the tanh approximation; that one is not)")
    if config.get("model_type") != "gpt2" and _partial_rotary(config, source=source) != 1.0:
        out.append(f"partial rotary {_partial_rotary(config, source=source):g} (our RoPE rotates the whole head)")
    kind = _rope_kind(config)
    if kind not in (None, "default"):
        out.append(f"rope_type={shown(kind)} (our RoPE is unscaled)")
    if config.get("model_type") == "gpt2":
        if config.get("scale_attn_weights", True) is not True:
            out.append("scale_attn_weights=false (our attention scales by 1/sqrt(head_dim))")
        if config.get("scale_attn_by_inverse_layer_idx"):
            out.append("scale_attn_by_inverse_layer_idx=true (our attention does not)")
    window, context = config.get("sliding_window"), config.get("max_position_embeddings")
    sliding = config.get("use_sliding_window", config.get("model_type") == "mistral")
    if sliding and isinstance(window, int) and isinstance(context, int) and window < context:
        out.append(f"sliding_window={window} (our attention sees the whole context)")
    return out


__all__ = ["Arch", "CLASSES", "TANH_GELU", "choose_arch", "hf_config", "import_mismatches"]
