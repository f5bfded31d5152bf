"""Our parameters <-> the tensors of a Hugging Face class, renamed and re-laid out, both ways by one table.

Per block (ours on the left, `blocks.{i}.` prefix; theirs after the class's block prefix):

    ours        GPT2LMHeadModel (h.{i})     GPTNeoXForCausalLM (layers.{i})    Llama / Qwen2 (layers.{i})
    norm1       ln_1                        input_layernorm                    input_layernorm
    attn.qkv    attn.c_attn (transposed)    attention.query_key_value          self_attn.q_proj, k_proj, v_proj
                                            (per head: q, k, v of head 0, ...)  (our rows split in three)
    attn.out    attn.c_proj (transposed)    attention.dense                    self_attn.o_proj
    norm2       ln_2                        post_attention_layernorm           post_attention_layernorm
    mlp.gate    -                           -                                  mlp.gate_proj
    mlp.up      mlp.c_fc (transposed)       mlp.dense_h_to_4h                  mlp.up_proj
    mlp.down    mlp.c_proj (transposed)     mlp.dense_4h_to_h                  mlp.down_proj

GPT-2's Conv1D stores a weight as (in, out), the transpose of nn.Linear. Our fused q/k/v rows are
[all query heads; all key heads; all value heads], each head's features contiguous and in the
rotate-half RoPE order that GPT-NeoX and Llama use too, so RoPE needs no permutation; GPT-NeoX fuses
q/k/v per head instead, a reshape. A tied head is not stored (the class ties it to the embedding).

On import every tensor is checked before it is re-laid out (`check_tensors`, from a safetensors header
alone): the class's names, each floating point and of the size `hf_sizes` derives from the config's
shape through the same re-layout; `from_hf_state` also refuses NaN and infinite values. So a tensor of
the wrong size is one line naming it, never an error of a concatenation or a reshape.
"""

from __future__ import annotations

from typing import Mapping

import torch

from depthwidth.errors import UserError
from depthwidth.hfio.arch import Arch
from depthwidth.model.transformer import Transformer
from depthwidth.shapes.checks import shown
from depthwidth.shapes.shape import Shape

#: model_type -> the prefix of block i's tensors
BLOCKS = {"gpt2": "transformer.h", "gpt_neox": "gpt_neox.layers", "llama": "model.layers"}
#: model_type -> our top-level module -> theirs
TOP = {
    "gpt2": {"embed": "transformer.wte", "pos_embed": "transformer.wpe", "final_norm": "transformer.ln_f",
             "head": "lm_head"},
    "gpt_neox": {"embed": "gpt_neox.embed_in", "final_norm": "gpt_neox.final_layer_norm", "head": "embed_out"},
    "llama": {"embed": "model.embed_tokens", "final_norm": "model.norm", "head": "lm_head"},
}
_LLAMA_QKV = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj")
#: model_type -> our block module -> (their module(s), how the tensor is re-laid out)
BLOCK = {
    "gpt2": {"norm1": ("ln_1", "same"), "attn.qkv": ("attn.c_attn", "t"), "attn.out": ("attn.c_proj", "t"),
             "norm2": ("ln_2", "same"), "mlp.up": ("mlp.c_fc", "t"), "mlp.down": ("mlp.c_proj", "t")},
    "gpt_neox": {"norm1": ("input_layernorm", "same"), "attn.qkv": ("attention.query_key_value", "per_head"),
                 "attn.out": ("attention.dense", "same"), "norm2": ("post_attention_layernorm", "same"),
                 "mlp.up": ("mlp.dense_h_to_4h", "same"), "mlp.down": ("mlp.dense_4h_to_h", "same")},
    "llama": {"norm1": ("input_layernorm", "same"), "attn.qkv": (_LLAMA_QKV, "split"),
              "attn.out": ("self_attn.o_proj", "same"), "norm2": ("post_attention_layernorm", "same"),
              "mlp.gate": ("mlp.gate_proj", "same"), "mlp.up": ("mlp.up_proj", "same"),
              "mlp.down": ("mlp.down_proj", "same")},
}
#: other names the same tensor has in checkpoints of some transformers versions
ALIASES = {"embed_out.weight": ("lm_head.weight",)}
#: tensors some checkpoints carry that are buffers, not weights (masks, rotary frequencies)
IGNORED_SUFFIXES = (".attn.bias", ".attn.masked_bias", ".attention.bias", ".attention.masked_bias",
                    "rotary_emb.inv_freq")


def _family(arch: Arch) -> str:
    return "llama" if arch.model_type in ("llama", "qwen2", "mistral") else arch.model_type


def expected_state(shape: Shape) -> dict[str, torch.Size]:
    """Our parameter names and sizes for `shape` (built on the meta device: no memory, no init)."""
    with torch.device("meta"):
        model = Transformer(shape)
    return {name: t.shape for name, t in model.state_dict().items()}


def their_names(ours: str, arch: Arch) -> tuple[tuple[str, ...], str]:
    """The tensor name(s) holding our parameter `ours` in `arch`'s class, and the re-layout kind."""
    family = _family(arch)
    module, _, param = ours.rpartition(".")
    if module.startswith("blocks."):
        _, index, inner = module.split(".", 2)
        theirs, kind = BLOCK[family][inner]
        names = (theirs,) if isinstance(theirs, str) else theirs
        return tuple(f"{BLOCKS[family]}.{index}.{n}.{param}" for n in names), kind
    return (f"{TOP[family][module]}.{param}",), "same"


def _to_theirs(t: torch.Tensor, kind: str, shape: Shape) -> list[torch.Tensor]:
    if kind == "t":
        return [t.t() if t.dim() == 2 else t]
    if kind == "per_head":  # (3, H, Dh, ...) -> (H, 3, Dh, ...)
        return [t.reshape(3, shape.n_heads, shape.head_dim, *t.shape[1:]).transpose(0, 1).reshape(t.shape)]
    if kind == "split":
        return list(t.split([shape.q_dim, shape.kv_dim, shape.kv_dim], dim=0))
    return [t]


def _to_ours(ts: list[torch.Tensor], kind: str, shape: Shape) -> torch.Tensor:
    t = ts[0]
    if kind == "t":
        return t.t() if t.dim() == 2 else t
    if kind == "per_head":  # (H, 3, Dh, ...) -> (3, H, Dh, ...)
        return t.reshape(shape.n_heads, 3, shape.head_dim, *t.shape[1:]).transpose(0, 1).reshape(t.shape)
    if kind == "split":
        return torch.cat(ts, dim=0)
    return t


def to_hf_state(state: dict[str, torch.Tensor], arch: Arch) -> dict[str, torch.Tensor]:
    """Our state dict (of any shape `arch` holds) -> the class's tensors, contiguous fp32 copies. A bias
    our shape lacks but the class always has is written as zeros (the same function)."""
    out = {}
    for name, size in expected_state(arch.hf_shape).items():
        t = state[name] if name in state else torch.zeros(size)
        names, kind = their_names(name, arch)
        for theirs, tensor in zip(names, _to_theirs(t.detach().float(), kind, arch.hf_shape)):
            out[theirs] = tensor.contiguous().clone()
    return out


def hf_sizes(arch: Arch) -> dict[str, tuple[tuple[int, ...], str]]:
    """The class's tensor name -> (its size, our parameter it holds) for `arch.hf_shape`, derived on the
    meta device through the re-layout `to_hf_state` writes with."""
    out = {}
    for name, size in expected_state(arch.hf_shape).items():
        names, kind = their_names(name, arch)
        for theirs, t in zip(names, _to_theirs(torch.empty(size, device="meta"), kind, arch.hf_shape)):
            out[theirs] = (tuple(t.shape), name)
    return out


def _dtype_name(dtype: torch.dtype | str) -> str:
    return str(dtype).removeprefix("torch.")


def check_tensors(found: Mapping[str, tuple[torch.dtype | str, tuple[int, ...]]], arch: Arch, *,
                  source: str) -> dict[str, str]:
    """Check what a checkpoint holds (tensor name -> (dtype, size), e.g. from a safetensors header) against
    the class `arch` of the config's shape: every tensor it needs is there (under its name or an alias),
    floating point and of the size the config implies, and none is left over. Returns the class's tensor
    name -> the name it has in `found`. One-line UserErrors naming the tensor."""
    chosen, used = {}, set()
    for name, (size, ours) in hf_sizes(arch).items():
        candidates = (name, *ALIASES.get(name, ()))
        used.update(candidates)
        present = next((c for c in candidates if c in found), None)
        if present is None:
            raise UserError(f"{source}: the weights lack tensor {name!r}, which this config's class needs")
        dtype, got = found[present]
        if not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
            raise UserError(f"{source}: tensor {present!r} is {_dtype_name(dtype)}; weights must be floating point "
                            "(float32, bfloat16, float16, ...)")
        if tuple(got) != size:
            raise UserError(f"{source}: tensor {present!r} has size {tuple(got)}, which does not fit the config's "
                            f"shape {arch.hf_shape.label()} (expected {size}, our {ours})")
        chosen[name] = present
    tied = arch.hf_shape.tie_embeddings
    extra = sorted(k for k in found if k not in used and not k.endswith(IGNORED_SUFFIXES)
                   and not (tied and k in ("lm_head.weight", "embed_out.weight")))
    if extra:
        raise UserError(f"{source}: {len(extra)} tensor(s) this config's class does not have, e.g. {shown(extra[0])}; "
                        "the weights do not belong to this config")
    return chosen


def from_hf_state(tensors: dict[str, torch.Tensor], arch: Arch, *, source: str) -> dict[str, torch.Tensor]:
    """The class's tensors -> our state dict for `arch.hf_shape` (fp32). Raises UserError naming a
    missing tensor, one that is not floating point or of the wrong size (`check_tensors`, before any is
    re-laid out), one holding NaN or infinite values, or a tensor no rule reads."""
    chosen = check_tensors({k: (t.dtype, tuple(t.shape)) for k, t in tensors.items()}, arch, source=source)
    out = {}
    for name in expected_state(arch.hf_shape):
        names, kind = their_names(name, arch)
        parts = [tensors[chosen[n]].float() for n in names]
        for n, part in zip(names, parts):
            if not bool(torch.isfinite(part).all()):
                raise UserError(f"{source}: tensor {chosen[n]!r} holds NaN or infinite values; refusing weights "
                                "that cannot be trained from or timed")
        out[name] = _to_ours(parts, kind, arch.hf_shape).contiguous()
    return out


__all__ = ["check_tensors", "expected_state", "from_hf_state", "hf_sizes", "their_names", "to_hf_state"]
