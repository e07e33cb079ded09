"""Did-you-mean hints and suggestions: the nearest name, field, unit or spelled-out count.

Comparisons against every candidate are bounded per run (``Context.hint_budget``), so a spec with
thousands of unknown names still checks in time linear in its size.
"""

from __future__ import annotations

import difflib
from typing import Iterable

from ccost import schema as SC
from ccost import units as U
from ccost.check.context import Context


def suggest(word: str, candidates: Iterable[str]) -> str | None:
    close = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return close[0] if close else None


def did_you_mean(word: str, candidates: Iterable[str]) -> str | None:
    s = suggest(word, candidates)
    return f"did you mean `{s}`?" if s else None


def hint(ctx: Context, name: str, candidates: list[str]) -> str | None:
    """``did you mean `x`?`` while the run's budget of comparisons lasts (``HINT_BUDGET``)."""
    if not candidates or ctx.hint_budget < len(candidates):
        return None
    ctx.hint_budget -= len(candidates)
    return did_you_mean(name, candidates)


def as_unit(word: str) -> str | None:
    """``word`` if it is a unit, the unit it misspells if it is a common mistake, else None."""
    try:
        U.parse_unit(word)
        return word
    except U.UnitError as exc:
        return exc.suggestion if word in U.COMMON_MISTAKES else None


# Field names of model configs and launch scripts (Hugging Face, Megatron-LM, the Llama reference code)
# with the ccost field they mean. Spelling distance alone sends `ffn_hidden` to `hidden`, which is a
# different number.
FIELD_ALIASES: dict[str, dict[str, str]] = {
    "model": {
        "ffn_hidden": "ffn", "ffn_hidden_size": "ffn", "intermediate_size": "ffn", "ffn_dim": "ffn",
        "d_ff": "ffn", "inter_dim": "ffn", "mlp_hidden": "ffn", "hidden_size": "hidden", "d_model": "hidden",
        "dim": "hidden", "n_embd": "hidden", "num_layers": "layers", "n_layers": "layers",
        "num_hidden_layers": "layers", "n_layer": "layers", "num_attention_heads": "heads",
        "n_heads": "heads", "n_head": "heads", "num_key_value_heads": "kv_heads", "n_kv_heads": "kv_heads",
        "num_query_groups": "kv_heads", "vocab_size": "vocab", "padded_vocab_size": "vocab",
        "num_experts": "experts", "n_routed_experts": "experts", "num_local_experts": "experts",
        "num_experts_per_tok": "top_k", "moe_router_topk": "top_k", "n_activated_experts": "top_k",
        "parameters": "params", "num_params": "params", "n_params": "params",
    },
    "plan": {
        "tensor_model_parallel_size": "tp", "tensor_parallel_size": "tp", "tp_size": "tp",
        "pipeline_model_parallel_size": "pp", "pipeline_parallel_size": "pp", "pp_size": "pp",
        "expert_model_parallel_size": "ep", "expert_parallel_size": "ep", "ep_size": "ep",
        "data_parallel_size": "dp", "dp_size": "dp", "batch_size": "batch", "global_batch_size": "batch",
        "micro_batches": "microbatches", "num_microbatches": "microbatches", "seq_len": "seq",
        "seq_length": "seq", "max_seq_len": "seq", "sequence_length": "seq",
    },
    "link": {"latency": "alpha", "bw": "bandwidth"},
    "gpu": {"hbm": "memory", "hbm_bw": "hbm_bandwidth", "memory_bandwidth": "hbm_bandwidth",
            "peak_flops": "flops"},
}


def field_guess(kind: str, word: str, names: Iterable[str]) -> str | None:
    """The field ``word`` probably meant in a ``kind`` block: a known alias first, then the closest name."""
    names = list(names)
    alias = FIELD_ALIASES.get(kind, {}).get(word)
    if alias in names:
        return alias
    return suggest(word, names)


# Magnitude suffixes people write after a count (`params = 70B`, `7M`, `1.5T`): in a spec they would be
# units (`B` is the byte), so the help spells the count out instead.
_COUNT_SUFFIXES = {"k": 3, "K": 3, "thousand": 3, "M": 6, "million": 6, "B": 9, "b": 9, "G": 9, "bn": 9,
                   "billion": 9, "T": 12, "trillion": 12}
_SUFFIX_WORDS = {3: "thousand", 6: "million", 9: "billion", 12: "trillion"}


def count_help(f: SC.Field, number_text: str, unit: str | None) -> str | None:
    """``params = 70B`` → "`B` is the byte, not a billion: write `params = 70e9` (or `70_000_000_000`)";
    None when ``unit`` is not a magnitude suffix, or ``f`` is not a count that runs into millions (for
    `layers = 80B` a billion is not what was meant)."""
    exp = _COUNT_SUFFIXES.get((unit or "").strip())
    try:
        big = float(f.example.replace("_", "")) >= 1e6
    except ValueError:
        big = False
    if exp is None or not big:
        return None
    field = f.name
    digits = number_text.replace("_", "")
    try:
        value = float(digits) * 10.0**exp
    except ValueError:
        return None
    spelled = f"{number_text}e{exp}" if "e" not in digits.lower() else f"{value:g}"
    whole = f" (or `{int(value):_}`)" if value == int(value) and value < 1e16 else ""
    what = {"B": "`B` is the byte, not a billion", "b": "`b` is the bit, not a billion",
            "G": "`G` is not a unit here", "M": "`M` is not a unit here", "T": "`T` is not a unit here",
            "k": "`k` is not a unit here", "K": "`K` is not a unit here"}.get(unit.strip(),
                                                                        "a count takes no unit")
    return (f"{what}: for {number_text} {_SUFFIX_WORDS[exp]} write `{field} = {spelled}`{whole}")




def prefix_count_help(f: SC.Field, number_text: str, unit: str, value: float) -> str | None:
    """``input_tokens = 1 KiB`` → "`KiB` is a unit of bytes: for 1 Ki = 1,024 write `input_tokens = 1024`":
    a prefixed byte unit on a count reads as its multiplier (``value``, the bytes the spec wrote), which the
    field documents far more often than the bare number (1 token). None when the unit is not a prefixed byte
    unit or the count it gives is outside the field's range (`layers = 80 GB`: write `layers = 80`)."""
    unit = unit.strip()
    if not (unit.endswith("B") and len(unit) > 1):
        return None
    try:
        factor, dim = U.parse_unit(unit)
    except U.UnitError:
        return None
    if dim != U.INFORMATION or factor <= 1 or not (value == value and value > 0):
        return None
    count = round(value)
    if abs(value - count) > 1e-9 * value or (f.minimum is not None and count < f.minimum) \
            or (f.maximum is not None and count > f.maximum):
        return None
    prefix = unit[:-1]
    return (f"`{unit}` is a unit of bytes and `{f.name}` a plain number: for {number_text} {prefix} = "
            f"{count:,} write `{f.name} = {count}`")
