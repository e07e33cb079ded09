"""Models from a Hugging Face ``config.json``: the shape, the parameter count computed from it, and a check
against the checkpoint's ``model.safetensors.index.json`` when one lies beside the config.

Two users: ``ccost import hf PATH/config.json`` prints a ``model`` block, and a spec's model block can name
the file (``model m { config = "hf/config.json" }``; ``ccost.check`` turns the config into members, which
the block's own fields override).

    >>> cfg = {"num_hidden_layers": 2, "hidden_size": 8, "num_attention_heads": 2, "intermediate_size": 16,
    ...        "vocab_size": 10, "tie_word_embeddings": False}
    >>> imported(cfg).params            # 2·10·8 + 2·(4·8·8 + 3·8·16 + 2·8) + 8
    1224

The parameter count is a sum over the tensors the architecture has, written out per family below
(``_count``) so a reader can check it against the modelling code:

* **attention**, GQA (Llama, Mistral, Mixtral, Qwen2): ``q`` d×H·hd, ``k`` and ``v`` d×KV·hd, ``o`` H·hd×d,
  with biases on q/k/v for Qwen2 (``qkv_bias``) and on all four for Llama's ``attention_bias``;
  **MLA** (DeepSeek-V2/V3): ``q_a`` d×q_lora, its RMSNorm, ``q_b`` q_lora×H·(nope+rope) (or one ``q``
  d×H·(nope+rope) without ``q_lora_rank``), ``kv_a`` d×(kv_lora+rope), its RMSNorm,
  ``kv_b`` kv_lora×H·(nope+v), ``o`` H·v×d;
* **MLP**: SwiGLU, three matrices (gate, up, down) of d×ffn; an MoE layer has ``experts`` routed and
  ``shared_experts`` always-active experts of d×expert_ffn each, and a router d×experts (plus its
  correction bias for DeepSeek-V3's ``noaux_tc``); DeepSeek's first ``first_k_dense_replace`` layers are
  dense;
* two RMSNorms per layer and a final one (d each); embeddings V×d and an LM head V×d unless tied.

DeepSeek-V3's multi-token-prediction module (``num_nextn_predict_layers``) is counted apart: ``params`` is
the main model (the 671B of the model card), the MTP module is reported beside it and added only where
the checkpoint's size is compared (the released weights include it).

Files are read with the same care as imports: local files only, inside the project (the nearest folder
holding ``.git`` above the spec, else the spec's folder), regular files, bounded size.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from typing import Any

from ccost import layout_rules

MAX_CONFIG_BYTES = 4 * 1024 * 1024  # a config.json is a few KB; some list every layer's type
MAX_INDEX_BYTES = 64 * 1024 * 1024  # an index names every tensor: ~10 MB for DeepSeek-V3
AGREE = 0.01  # the index check warns beyond 1 %
INDEX_NAME = "model.safetensors.index.json"

# torch_dtype -> ccost dtype
_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32", "float": "fp32",
           "float8_e4m3fn": "fp8", "float8_e5m2": "fp8", "int8": "int8"}
_BYTES = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5}


class HfError(Exception):
    """A config.json that cannot be read or does not describe a model: ``message`` and ``help``."""

    def __init__(self, message: str, help: str | None = None):
        super().__init__(message)
        self.message = message
        self.help = help


# --------------------------------------------------------------------------------------------------
# Reading files safely


def read_bounded(path: str, limit: int, root: str | None = None, shown: str | None = None) -> str:
    """The text of a local regular file of at most ``limit`` bytes, inside ``root`` when given; HfError
    saying why not (naming the file as ``shown``). Read by ``ccost.userfiles.read_user_bytes``, the reader
    of every user file; nothing of a refused file's content is ever shown."""
    from ccost.diagnostics import CcostError
    from ccost.userfiles import read_user_bytes

    name = shown or path
    real = confined(name, root, path) if root is not None else os.path.realpath(path)
    try:
        data = read_user_bytes(real, limit=limit, code="E510", what="config.json", display=name,
                               help="name a config.json file")
    except FileNotFoundError:
        raise HfError(f"{name}: no such file", "check the path: it is relative to the spec") from None
    except CcostError as exc:
        d = exc.diagnostics[0]
        raise HfError(d.message, d.help) from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise HfError(f"{name} is not UTF-8 text", "a config.json is JSON text") from None


def confined(written: str, root: str, path: str) -> str:
    """The real path of ``path`` when it stays inside the project ``root`` (``ccost.userfiles.confine``:
    the rule imports follow), else HfError naming it as ``written``."""
    from ccost.userfiles import Outside, confine

    try:
        return confine(path, root, written)
    except Outside as exc:
        how = "is a symbolic link that leads" if exc.through_link else "leads"
        raise HfError(f"{written} {how} outside the project ({root})",
                      "copy the config.json into the project, next to the spec or below it") from None


def parse_json(text: str, path: str) -> dict:
    from ccost.userfiles import DataError, load_json

    try:
        doc = load_json(text)  # bounded nesting; a 5,000-digit number is refused, not converted
    except DataError as exc:
        raise HfError(f"{path}: {exc.message}",
                      "a config.json as Hugging Face writes it is a JSON object") from None
    if not isinstance(doc, dict):
        raise HfError(f"{path} is JSON but not an object", "a config.json is a JSON object `{...}`")
    return doc


def load_config(path: str, root: str | None = None, shown: str | None = None) -> dict:
    return parse_json(read_bounded(path, MAX_CONFIG_BYTES, root, shown), shown or path)


# --------------------------------------------------------------------------------------------------
# config.json -> fields and counts


@dataclass
class Imported:
    """What a config.json says, in ccost's terms."""

    fields: dict[str, Any]  # ccost model field -> value, in the order a model block lists them
    params: int  # the main model, MTP module excluded
    active_params: int | None  # MoE: parameters a token passes through
    mtp_params: int  # multi-token-prediction module (DeepSeek-V3), 0 when none
    parts: list[tuple[str, int]]  # a readable breakdown of ``params``
    notes: list[str] = field(default_factory=list)
    quantized_linear: int = 0  # parameters in fp8 linears of a quantized checkpoint (for the index check)
    model_type: str = ""


#: The config.json keys each field of the model block is read from (the first present), by family.
KEYS: dict[str, tuple[str, ...]] = {
    "layers": ("num_hidden_layers", "n_layer", "num_layers"),
    "hidden": ("hidden_size", "d_model", "n_embd"),
    "heads": ("num_attention_heads", "n_head"),
    "vocab": ("vocab_size",),
    "ffn": ("intermediate_size", "ffn_dim", "n_inner"),
    "kv_heads": ("num_key_value_heads", "num_kv_heads"),
    "head_dim": ("head_dim",),
    "experts": ("num_local_experts", "n_routed_experts", "num_experts"),
    "top_k": ("num_experts_per_tok", "num_experts_per_token", "moe_top_k"),
    "shared_experts": ("n_shared_experts", "num_shared_experts"),
    "expert_ffn": ("moe_intermediate_size",),
    "kv_lora_rank": ("kv_lora_rank",),
    "q_lora_rank": ("q_lora_rank",),
    "qk_nope_head_dim": ("qk_nope_head_dim",),
    "qk_rope_head_dim": ("qk_rope_head_dim",),
    "v_head_dim": ("v_head_dim",),
    "mtp_layers": ("num_nextn_predict_layers",),
}


def _get(cfg: dict, *keys: str, default: Any = None) -> Any:
    for k in keys:
        if k in cfg and cfg[k] is not None:
            return cfg[k]
    return default


def _which(cfg: dict, keys: tuple[str, ...]) -> str | None:
    """The key ``_get`` reads: the first of ``keys`` the config gives."""
    return next((k for k in keys if k in cfg and cfg[k] is not None), None)


def _int(cfg: dict, keys: tuple[str, ...], what: str, required: bool = True, minimum: int = 1) -> int | None:
    v = _get(cfg, *keys)
    if v is None:
        if required:
            raise HfError(f"config.json has no `{keys[0]}` ({what})",
                          "is this the config.json of a transformer language model?")
        return None
    whole = isinstance(v, int) or (isinstance(v, float) and v.is_integer())
    if isinstance(v, bool) or not whole:
        raise HfError(f"config.json: `{keys[0]}` should be a whole number ({what}); "
                      f"it is {json.dumps(v)[:40]}")
    v = int(v)
    if v < minimum or v > 1 << 40:
        raise HfError(f"config.json: `{keys[0]}` = {v} is out of range for {what}")
    return v


def _bool(cfg: dict, key: str, default: bool) -> bool:
    v = cfg.get(key, default)
    if v is None:
        return default
    if not isinstance(v, bool):
        raise HfError(f"config.json: `{key}` should be true or false; it is {json.dumps(v)[:40]}")
    return v


def _weights_dtype(cfg: dict, notes: list[str]) -> tuple[str | None, bool]:
    """(ccost dtype of the released weights, whether the linears are fp8-quantized)."""
    q = cfg.get("quantization_config")
    torch_dtype = _get(cfg, "torch_dtype", "dtype")
    if isinstance(q, dict):
        method = str(q.get("quant_method", "")).lower()
        bits = q.get("bits")
        if method == "fp8" or q.get("fmt") in ("e4m3", "e5m2"):
            return "fp8", True
        if bits in (4, 8):
            notes.append(f"quantization `{method or '?'}` with {bits}-bit weights: weights = int{bits}")
            return f"int{bits}", False
        notes.append(f"quantization `{method or '?'}` is not one ccost knows: weights left at the default")
        return None, False
    if isinstance(torch_dtype, str) and torch_dtype in _DTYPES:
        return _DTYPES[torch_dtype], False
    return None, False


def imported(cfg: dict) -> Imported:
    """Read a config.json (as a dict): the model block's fields and the parameter count. HfError when a
    shape the count needs is missing or malformed."""
    if "num_hidden_layers" not in cfg and isinstance(cfg.get("text_config"), dict):
        cfg = {**cfg["text_config"], **{k: v for k, v in cfg.items() if k in ("torch_dtype", "dtype")}}
    notes: list[str] = []
    model_type = str(cfg.get("model_type", ""))
    L = _int(cfg, KEYS["layers"], "the number of layers")
    d = _int(cfg, KEYS["hidden"], "the hidden size")
    H = _int(cfg, KEYS["heads"], "the number of attention heads")
    V = _int(cfg, KEYS["vocab"], "the vocabulary size")
    ffn = _int(cfg, KEYS["ffn"], "the feed-forward size", required=False)
    kv = _int(cfg, KEYS["kv_heads"], "the number of key/value heads", required=False)
    head_dim_given = _int(cfg, KEYS["head_dim"], "the size of one attention head", required=False)
    assert L and d and H and V
    heads = layout_rules.kv_heads_contradiction(H, kv)  # the checker's E207, in config.json's keys
    if heads == "more":
        raise HfError(f"config.json: `{KEYS['kv_heads'][0]}` = {kv} is more than `{KEYS['heads'][0]}` = {H}",
                      "a key/value head serves one or more query heads: at most as many key/value heads as heads")
    if heads == "divide":
        raise HfError(f"config.json: `{KEYS['kv_heads'][0]}` = {kv} does not divide `{KEYS['heads'][0]}` = {H}",
                      "grouped-query attention gives each key/value head the same number of query heads")
    E = _int(cfg, KEYS["experts"], "the number of experts",
             required=False, minimum=0) or 0
    top_k = _int(cfg, KEYS["top_k"], "experts per token",
                 required=False, minimum=0) if E else None
    shared = _int(cfg, KEYS["shared_experts"], "shared experts", required=False,
                  minimum=0) or 0 if E else 0
    expert_ffn = (_int(cfg, KEYS["expert_ffn"], "the FFN size of one expert", required=False)
                  if E else None)
    shared_ffn = _int(cfg, ("shared_expert_intermediate_size",), "the FFN size of the shared expert",
                      required=False) if E else None
    dense_first = _int(cfg, ("first_k_dense_replace",), "dense layers before the MoE layers", required=False,
                       minimum=0) or 0 if E else 0
    freq = _int(cfg, ("moe_layer_freq",), "every how many layers an MoE layer comes", required=False) or 1
    tied = _bool(cfg, "tie_word_embeddings", False)
    if "tie_word_embeddings" not in cfg:
        notes.append("`tie_word_embeddings` is absent: taken as false (separate LM head)")
    mlp_bias = _bool(cfg, "mlp_bias", False)
    attn_bias = _bool(cfg, "attention_bias", False)
    qkv_bias = attn_bias or model_type in ("qwen2", "qwen2_moe")  # Qwen2 always has q/k/v biases
    kv_lora = _int(cfg, KEYS["kv_lora_rank"], "the MLA key/value latent rank", required=False)
    mla = kv_lora is not None
    if mla:
        q_lora = _int(cfg, KEYS["q_lora_rank"], "the MLA query rank", required=False)
        nope = _int(cfg, KEYS["qk_nope_head_dim"], "the MLA per-head query/key size without RoPE")
        rope = _int(cfg, KEYS["qk_rope_head_dim"], "the MLA per-head RoPE size")
        vdim = _int(cfg, KEYS["v_head_dim"], "the MLA per-head value size")
    mtp = _int(cfg, KEYS["mtp_layers"], "multi-token-prediction modules", required=False,
               minimum=0) or 0
    if E and expert_ffn is None and ffn is None:
        raise HfError("config.json has experts but neither `moe_intermediate_size` nor `intermediate_size`")
    if not E and ffn is None:
        raise HfError("config.json has no `intermediate_size` (the feed-forward size)",
                      "is this the config.json of a transformer language model?")
    if E and top_k is None:
        raise HfError("config.json has experts but no `num_experts_per_tok` "
                      "(experts each token is routed to)")
    if E and top_k == 0:
        raise HfError("config.json: `num_experts_per_tok` is 0, so no token reaches an expert",
                      "a mixture-of-experts model routes each token to at least 1 expert; is this the "
                      "model's config.json?")
    experts = layout_rules.top_k_contradiction(E, top_k)
    if experts == "more":
        raise HfError(f"config.json: `num_experts_per_tok` = {top_k} is more than the {E} experts")
    if experts == "all":  # no share of the parameters is routed
        raise HfError(f"config.json: `num_experts_per_tok` = {top_k} equals the number of experts: every token "
                      "visits every expert", "a mixture-of-experts model routes each token to fewer experts than "
                      "it has; is this the model's config.json?")
    if E and dense_first >= L:
        raise HfError(f"config.json: `first_k_dense_replace` = {dense_first} makes every one of the {L} "
                      "layers dense, so no layer has experts",
                      "a mixture-of-experts model has MoE layers after its first dense ones; is this the "
                      "model's config.json?")
    efn = expert_ffn or ffn
    assert efn is not None

    # --- attention, per layer
    if mla:
        qk = nope + rope
        q = (d * q_lora + q_lora + q_lora * H * qk) if q_lora else d * H * qk
        attn = q + d * (kv_lora + rope) + kv_lora + kv_lora * H * (nope + vdim) + H * vdim * d
        attn_linear = attn - (q_lora or 0) - kv_lora
    else:
        hd = head_dim_given or d // H
        if not head_dim_given and d % H:
            raise HfError(f"config.json: hidden_size {d} is not a multiple of num_attention_heads {H} and "
                          "no `head_dim` is given")
        kvh = kv or H
        attn_linear = d * H * hd + 2 * d * kvh * hd + H * hd * d
        attn = attn_linear + ((H * hd + 2 * kvh * hd) if qkv_bias else 0) + (d if attn_bias else 0)

    # --- feed-forward, per layer
    def mlp(inner: int) -> int:
        return 3 * d * inner + ((2 * inner + d) if mlp_bias else 0)

    router = E * d + (E if str(cfg.get("topk_method", "")) == "noaux_tc" else 0)
    shared_p = (mlp(shared_ffn) + d) if shared_ffn else shared * mlp(efn)  # Qwen2-MoE adds a 1-wide gate

    # layer i is an MoE layer when i >= dense_first and i % freq == 0: counted, not looped over (a config
    # may claim 10^12 layers; the range check below refuses it in constant time)
    moe_layers = (_multiples(L, freq) - _multiples(dense_first, freq)) if E and dense_first < L else 0
    dense_layers = L - moe_layers
    dense_ffn = ffn if ffn is not None else efn
    norms = 2 * d
    moe_layer = E * mlp(efn) + shared_p + router
    layer_params = L * (attn + norms) + dense_layers * mlp(dense_ffn) + moe_layers * moe_layer
    emb = V * d
    head = 0 if tied else V * d
    params = emb + head + layer_params + d
    parts = [("embeddings", emb)] + ([("lm_head", head)] if head else []) + [
        ("attention", L * attn), ("norms", L * norms + d)]
    if dense_layers:
        parts.append(("dense mlp" if E else "mlp", dense_layers * mlp(dense_ffn)))
    if moe_layers:
        parts.append(("experts and routers", moe_layers * moe_layer))

    active = None
    if E:
        active_layer = (top_k or 0) * mlp(efn) + shared_p + router
        active = (emb + head + L * (attn + norms) + dense_layers * mlp(dense_ffn)
                  + moe_layers * active_layer + d)

    mtp_params = 0
    if mtp:
        # DeepSeek-V3 README_WEIGHTS: each MTP module is one more decoder layer (an MoE layer) plus enorm,
        # hnorm, eh_proj (2d -> d) and a final norm; embeddings and the head are shared with the main model.
        mtp_params = mtp * (attn + norms + (moe_layer if E else mlp(dense_ffn)) + 2 * d + 2 * d * d + d)
        notes.append(f"{mtp} multi-token-prediction module(s) in the checkpoint: {mtp_params:,} parameters "
                     "beyond `params` (shared embeddings and head not counted again); ccost plans the main "
                     "model, as the model card's count does")

    # parameters stored as fp8 in an fp8-quantized checkpoint: the attention and MLP linears
    linear = (L * attn_linear + dense_layers * 3 * d * dense_ffn
              + moe_layers * (E * 3 * d * efn + (3 * d * shared_ffn if shared_ffn else shared * 3 * d * efn)))
    if mtp:
        linear += mtp * (attn_linear + (E * 3 * d * efn + shared * 3 * d * efn if E else 3 * d * dense_ffn))

    weights, quantized = _weights_dtype(cfg, notes)
    out: dict[str, Any] = {"layers": L, "hidden": d, "heads": H}
    if not mla:
        out["kv_heads"] = kv or H
        if head_dim_given and head_dim_given != d // H:
            out["head_dim"] = head_dim_given
    if ffn is not None:
        out["ffn"] = ffn
    out["vocab"] = V
    if E:
        out["experts"] = E
        out["top_k"] = top_k
        if shared:
            out["shared_experts"] = shared
        if expert_ffn is not None and expert_ffn != ffn:
            out["expert_ffn"] = expert_ffn
        out["moe_layers"] = moe_layers
        if dense_layers:
            out["dense_layers"] = dense_layers
    if mla:
        if q_lora:
            out["q_lora_rank"] = q_lora
        out.update(kv_lora_rank=kv_lora, qk_nope_head_dim=nope, qk_rope_head_dim=rope, v_head_dim=vdim)
        notes.append("multi-head latent attention: kv_heads is left out (the KV cache holds one latent of "
                     f"kv_lora_rank {kv_lora} + qk_rope_head_dim {rope} per token, not per-head K and V)")
    if mtp:
        out["mtp_layers"] = mtp
    if qkv_bias:
        out["qkv_bias"] = True
    if tied:
        out["tied_embeddings"] = True
    out["params"] = params
    if active is not None:
        out["active_params"] = active
    if weights is not None:
        out["weights"] = weights
    _in_range(out, {f: k for f in out if f in KEYS and (k := _which(cfg, KEYS[f])) is not None})
    return Imported(out, params, active, mtp_params, parts, notes,
                    quantized_linear=linear if quantized else 0, model_type=model_type)


def _multiples(n: int, k: int) -> int:
    """How many of 0, 1, ..., n - 1 are multiples of k."""
    return -(-n // k) if n > 0 else 0


def _in_range(fields: dict[str, Any], keys: dict[str, str]) -> None:
    """Every imported count within the range the model block's field allows (``ccost.schema``), so the
    printed block checks, and a spec naming the config gets one E510 at the string instead of an E203
    on a number it never wrote. ``keys``: the config key each field came from."""
    from ccost.schema import SCHEMA

    kind = SCHEMA["model"]
    for name, value in fields.items():
        f = kind.field(name)
        if f is None or isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        low = f.minimum is not None and (value <= f.minimum if f.min_open else value < f.minimum)
        high = f.maximum is not None and (value >= f.maximum if f.max_open else value > f.maximum)
        if low or high:
            lo = "" if f.minimum is None else _lit(int(f.minimum) if float(f.minimum).is_integer() else f.minimum)
            hi = "" if f.maximum is None else _lit(int(f.maximum) if float(f.maximum).is_integer() else f.maximum)
            source = keys.get(name)
            given = f"`{source}` = {_lit(value)}" if source else f"`{name}` = {_lit(value)} (computed from the shapes)"
            raise HfError(f"config.json: {given} is out of the range of a model's `{name}` "
                          f"[{lo}, {hi}]", "is this the config.json of a real model?")


# --------------------------------------------------------------------------------------------------
# The checkpoint's size


@dataclass(frozen=True)
class IndexCheck:
    total_size: int  # bytes, from the index
    expected: float  # bytes, from the count
    dtype: str
    params_in_checkpoint: int

    @property
    def ratio(self) -> float:
        return self.total_size / self.expected

    @property
    def agrees(self) -> bool:
        return abs(self.ratio - 1.0) <= AGREE

    def text(self) -> str:
        diff = (self.ratio - 1.0) * 100
        return (f"{INDEX_NAME} gives total_size {self.total_size:,} bytes; the shapes give "
                f"{self.params_in_checkpoint:,} parameters = {self.expected:,.0f} bytes in {self.dtype} "
                f"({diff:+.2f} %)")


def expected_bytes(model: Imported, dtype_name: str | None) -> tuple[float, str, int]:
    """Bytes the checkpoint should hold: every parameter (MTP included) at the weight dtype; an fp8
    checkpoint keeps embeddings, norms and routers at the config's torch_dtype. Block scales (4 bytes per
    128×128 block, 0.02 %) are left out."""
    n = model.params + model.mtp_params
    dtype = model.fields.get("weights") or dtype_name or "bf16"
    if model.quantized_linear:
        high = dtype_name if dtype_name in _BYTES and dtype_name != "fp8" else "bf16"
        b = model.quantized_linear * 1.0 + (n - model.quantized_linear) * _BYTES[high]
        return b, f"fp8 (linears) and {high} (the rest)", n
    return n * _BYTES[dtype], dtype, n


def check_index(model: Imported, index_path: str, torch_dtype: str | None = None,
                root: str | None = None) -> IndexCheck | None:
    """Compare the count with ``metadata.total_size`` of the index; None when the index has no usable
    size. HfError when the index cannot be read."""
    doc = parse_json(read_bounded(index_path, MAX_INDEX_BYTES, root), index_path)
    meta = doc.get("metadata")
    total = meta.get("total_size") if isinstance(meta, dict) else None
    if isinstance(total, str) and total.isdigit():
        total = int(total)
    number = isinstance(total, (int, float)) and not isinstance(total, bool)
    if not number or not math.isfinite(total) or total <= 0:
        return None
    expected, dtype, n = expected_bytes(model, _DTYPES.get(str(torch_dtype)) if torch_dtype else None)
    return IndexCheck(int(total), expected, dtype, n)


# --------------------------------------------------------------------------------------------------
# The printed block


def block_name(config_path: str) -> tuple[str, str]:
    """(name, title) for a block from the config's folder: ``Llama-3.1-8B/config.json`` →
    (``llama_3_1_8b``, ``Llama-3.1-8B``)."""
    folder = os.path.basename(os.path.dirname(os.path.abspath(config_path))) or "model"
    # a name is ASCII letters, digits and _ (the grammar's): `Modèle-ü` becomes `mod_le_`, its title keeps it
    name = "".join(c.lower() if c.isascii() and c.isalnum() else "_" for c in folder).strip("_")
    while "__" in name:
        name = name.replace("__", "_")
    if not name or not (name[0].isalpha() or name[0] == "_"):
        name = "m_" + name
    from ccost.schema import keywords

    if name in keywords():
        name = "my_" + name
    return name, folder


def _lit(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int) and abs(v) >= 1_000_000:
        return f"{v:_}"
    return str(v)


def model_block(model: Imported, name: str, title: str, source: str,
                index: IndexCheck | None = None, index_note: str | None = None) -> str:
    """A model block (with comments saying where every number came from) that checks on its own."""
    esc = title.replace("\\", "\\\\").replace('"', '\\"')
    src = source.replace("\\", "\\\\").replace('"', '\\"')
    lines = [f"# Imported by `ccost import hf` from {source}."]
    total = model.params
    lines.append(f"# params = {total:,} ({total / 1e9:.2f}B), computed from the shapes:")
    for label, n in model.parts:
        lines.append(f"#   {label:<20} {n:>18,}")
    if model.active_params is not None:
        lines.append(f"# active_params = {model.active_params:,} ({model.active_params / 1e9:.2f}B): "
                     "attention, dense layers, top_k + shared experts, embeddings")
    for n in model.notes:
        lines.append(f"# note: {n}")
    if index is not None:
        verdict = "agrees" if index.agrees else "DISAGREES (beyond 1 %)"
        lines.append(f"# checkpoint: {index.text()}: {verdict}")
    elif index_note:
        lines.append(f"# checkpoint: {index_note}")
    lines.append(f'model {name} "{esc}" {{')
    for k, v in model.fields.items():
        lines.append(f"  {k} = {_lit(v)}")
    lines.append(f'  source = "{src}"')
    lines.append("}")
    return "\n".join(lines) + "\n"
