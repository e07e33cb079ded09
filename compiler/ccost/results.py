"""The results document's keys, in one table: path, JSON type, unit, meaning and a label for people.

``ccost eval --format json|yaml`` prints the document that ``ccost.evaluate.results_document`` builds.
This table is its contract, and everything that describes the document is generated from it, so nothing
is typed twice:

- ``json_schema()`` — the JSON Schema of the document (``ccost schema --results``); a test validates
  every example spec's output against it, with ``additionalProperties: false`` so an undocumented key
  fails;
- ``markdown()`` — the key table of ``docs/interface.md`` (between its ``result-keys`` markers; a test
  checks that the committed table is this output);
- ``label_in(key, context)`` and ``record(key)`` — how every writer shows a key: ``ccost eval``'s JSON
  (``integral`` keys as integers) and text, the review (``dimension`` picks the format; the label of each
  context — a narrow column, a search, a comparison, the key numbers — is a field of the record), and
  ``ccost diff``. No writer keeps a table of labels, units or integral keys of its own.

Paths: ``.`` separates keys, ``[]`` marks a list, ``<plan>``-style segments are names the spec chooses
(a plan, sweep, comparison, search, a swept field, an efficiency threshold, an algorithm).
``SCHEMA_VERSION`` changes when a key is removed or changes its meaning or unit; adding a key does not
change it (scripts should ignore keys they do not know).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ccost import units
from ccost.axes import AXES
from ccost.collectives import ALGORITHM_NAMES, KINDS
# NUM: a finite float, or null where it is undefined (never NaN: see ccost.output); the phases' own keys
# are declared with their records in the schema
from ccost.schema import NUM, PHASE_KINDS, PHASE_NAMES, PhaseKind

SCHEMA_VERSION = 1



@dataclass(frozen=True)
class Key:
    """One key of the document, and how every writer shows it (``ccost eval``'s JSON and text, the review,
    ``ccost diff``): no writer keeps its own table of labels, units or integral keys."""

    path: str
    type: str  # JSON types joined by |: number, integer, string, boolean, null, object, array, any
    unit: str  # s, B, B/s, FLOP, fraction (0.3 = 30 %), tokens/s, count, ratio, text, ...
    meaning: str
    label: str = ""  # how a person reads it (ccost diff, ccost eval's text); defaults to the last segment
    optional: bool = False  # absent from some documents or records
    normative: bool = False  # one of the keys of the interface ccost was designed to (docs/interface.md)
    # How the value is printed, by dimension (one of DIMS); "" takes it from the unit (UNIT_DIMS).
    dim: str = ""
    # Whole values are written as integers (JSON, YAML): counts; byte sizes and `integer` keys always are.
    integral: bool = False
    # The label in each context whose wording differs on purpose; "" falls back as the comment says.
    short: str = ""  # a narrow table column (sweep and search tables); else label
    search: str = ""  # a search's layout tables; else short
    compare: str = ""  # the review's comparison rows; else label
    review: str = ""  # the review's key numbers, which carry a definition where it helps; else label
    text: str = ""  # the plan block of ``ccost eval``'s text; else label

    @property
    def name(self) -> str:
        return self.path.rsplit(".", 1)[-1]

    @property
    def dimension(self) -> str:
        return self.dim or UNIT_DIMS.get(self.unit, "")

    def label_in(self, context: str = "label") -> str:
        """The label in ``context`` (one of CONTEXTS), with the fallbacks of the fields' comments."""
        lab = self.label or self.name
        short = self.short or lab
        return {"label": lab, "short": short, "search": self.search or short, "compare": self.compare or lab,
                "review": self.review or lab, "text": self.text or lab}[context]


@dataclass(frozen=True)
class MemoryPart:
    """One part of the memory per GPU: declared here once, it is a key of a plan's ``memory`` section, a
    part of ``program.Memory`` (which the cost models fill in by ``name``), a line of ``ccost explain``'s
    memory group, a word of checklist item 11 and a row of the review's memory table."""

    name: str  # the part's name in ``program.Memory`` (``memory(x, kv_cache=...)``)
    key: str  # its key in a plan's ``memory`` section (``plans.<plan>.memory.KEY``)
    meaning: str
    label: str  # how the document's readers see it (``label_in``)
    word: str  # how checklist item 11 names it ("weights 35.3 GB + KV cache 10.7 GB")
    always: bool = False  # item 11 names it even when it is zero


#: The parts of the memory per GPU, in the order they are listed and summed.
MEMORY_PARTS: tuple[MemoryPart, ...] = (
    MemoryPart("weights", "weights_bytes", "weights on one GPU", "weights", "weights", always=True),
    MemoryPart("kv_cache", "kv_cache_bytes", "KV cache on one GPU", "KV cache", "KV cache"),
    MemoryPart("gradients", "gradient_bytes", "gradients on one GPU (training)", "gradients", "gradients"),
    MemoryPart("optimizer", "optimizer_bytes", "optimizer state on one GPU (training)", "optimizer state",
               "optimizer"),
    MemoryPart("activations", "activation_bytes", "activations one GPU holds (training: the micro-batches in "
               "flight and the logits)", "activations", "activations"),
)

def _section_keys(plan: str, phase: PhaseKind) -> list[Key]:
    """The keys of ``phase``'s own part of a plan's document: the section and one per field."""
    return [Key(f"{plan}.{phase.section}", "object", "", phase.section_doc, phase.section, optional=True),
            *[Key(f"{plan}.{phase.section}.{f.name}", f.type, f.unit, f.meaning, f.label, optional=True,
                  **dict(f.wording)) for f in phase.section_fields]]


#: The contexts a label can differ in (the fields of Key of the same names, and "label").
CONTEXTS = ("label", "short", "search", "compare", "review", "text")

#: How values are printed: time (s → ms, µs), bytes (binary units), gb (decimal units, to read against a GPU's
#: 80 GB), fraction (%), ratio (×), rate (per second, 4 digits), count, money, power, flop, flop_rate.
DIMS = ("time", "bytes", "gb", "fraction", "ratio", "rate", "count", "money", "power", "flop", "flop_rate",
        "energy")
UNIT_DIMS = {"s": "time", "B": "bytes", "fraction": "fraction", "ratio": "ratio", "tokens/s": "rate",
             "1/s": "rate", "count": "count", "USD": "money", "USD/h": "money", "W": "power", "FLOP": "flop",
             "FLOP/s": "flop_rate", "J": "energy"}


def _m(type_: str, unit: str, meaning: str, label: str, normative: bool, **kw) -> Key:
    """A shared metric's record; ``_metrics`` places it under each prefix."""
    return Key("", type_, unit, meaning, label, normative=normative, **kw)


# tp·pp·ep·dp, and the optional degrees (cp) that multiply it when above 1, from the axis registry.
_GPU_PRODUCT = "·".join(a.name for a in AXES if not a.optional) + "".join(
    f" (·{a.name} when above 1)" for a in AXES if a.optional)

# The numbers a plan, a sweep point and a search record share, with every context's label.
_METRICS: dict[str, Key] = {
    "gpus": _m("integer", "count", "GPUs the plan uses: " + _GPU_PRODUCT, "GPUs", True),
    "weight_bytes_per_gpu": _m(NUM, "B", "weight bytes one GPU holds (FSDP: its shard plus one gathered layer)",
                               "weights per GPU", True, dim="gb"),
    "memory_bytes_per_gpu": _m(NUM, "B", "memory one GPU holds: weights + KV cache (+ gradients and optimizer "
                               "state in training)", "memory per GPU", True, dim="gb", short="memory/GPU"),
    "fits_memory": _m("boolean", "", "memory per GPU within the policy's `max_memory` share of the GPU's memory",
                      "fits in memory", True, short="fits"),
    "compute_time_s": _m(NUM, "s", "compute per step (roofline, or `compute_time` given)", "compute time", True,
                         short="compute", text="compute"),
    "comm_time_s": _m(NUM, "s", "communication per step: Σ count × time of each collective", "T_comm", True,
                      text="communication"),
    "latency_term_s": _m(NUM, "s", "latency term of T_comm: Σ count·α·hops", "latency term", True),
    "bandwidth_term_s": _m(NUM, "s", "bandwidth term of T_comm: Σ count·volume/B", "bandwidth term", True),
    "exposed_comm_s": _m(NUM, "s", "communication not hidden behind compute: (T_comm − T_hidden)·(1 − overlap), "
                         "T_hidden the ring-attention sends behind the attention (cp; else 0)",
                         "exposed communication", True, review="exposed comm", compare="exposed comm"),
    # a search ranks by latency_s (one pass through the stages), so its step_time_s is named "pipelined step"
    "step_time_s": _m(NUM, "s", "one step: compute + exposed communication (pipelined when pp > 1)",
                      "step time", True, search="pipelined step"),
    "overhead": _m(NUM, "fraction", "T_comm / T_compute", "overhead", True, review="overhead (T_comm / T_compute)"),
    "speedup": _m(NUM, "ratio", "single-GPU step time / this step time (times dp)", "speedup", True,
                  review="speedup vs 1 GPU"),
    "efficiency": _m(NUM, "fraction", "speedup / GPUs", "efficiency", True, review="efficiency (speedup / N)"),
    "bubble": _m(NUM, "fraction", "pipeline bubble (P−1)/(M+P−1)", "pipeline bubble", True, short="bubble"),
    "latency_s": _m(NUM, "s", "one pass of the batch through every stage in turn (the notes' per-token "
                    "latency); `compare ... by = latency` ranks on it", "latency", False),
    "throughput_tokens_s": _m(NUM, "tokens/s", "tokens per step / step time", "throughput", False,
                              short="tokens/s", compare="tokens/s"),
    "throughput_per_gpu": _m(NUM, "tokens/s", "throughput / GPUs", "throughput per GPU", False,
                             short="tokens/s/GPU", compare="tokens/s per GPU"),
}


def _metrics(prefix: str, names: tuple[str, ...], optional: bool = False,
             normative: bool | tuple[str, ...] = True) -> list[Key]:
    """Keys ``prefix.name`` for the shared metrics ``names``. ``normative``: True marks those the original
    interface names for a plan, a tuple marks exactly those, False none (search records are ccost's own)."""
    out = []
    for n in names:
        m = _METRICS[n]
        mark = n in normative if isinstance(normative, tuple) else (m.normative and normative)
        out.append(replace(m, path=f"{prefix}.{n}", optional=optional, normative=mark))
    return out


# The order of the keys in each record, as ccost.evaluate and ccost.search write them.
PLAN_METRICS = ("gpus", "weight_bytes_per_gpu", "memory_bytes_per_gpu", "fits_memory", "compute_time_s",
                "comm_time_s", "latency_term_s", "bandwidth_term_s", "exposed_comm_s", "step_time_s", "overhead",
                "speedup", "efficiency", "bubble")
POINT_METRICS = ("gpus", "step_time_s", "latency_s", "speedup", "efficiency", "overhead", "compute_time_s",
                 "comm_time_s", "latency_term_s", "bandwidth_term_s", "throughput_tokens_s",
                 "memory_bytes_per_gpu", "fits_memory")
RECORD_METRICS = ("gpus", "latency_s", "step_time_s", "throughput_per_gpu", "throughput_tokens_s", "efficiency",
                  "overhead", "speedup", "compute_time_s", "comm_time_s", "bubble", "memory_bytes_per_gpu",
                  "fits_memory")


def _keys() -> list[Key]:
    K = Key
    plan = "plans.<plan>"
    coll = f"{plan}.collectives[]"
    keys = [
        K("ccost", "string", "text",
          "the version of ccost that wrote the document (the original interface's name for it)", normative=True),
        K("ccost_version", "string", "text", "the same version, under a self-explaining name"),
        K("schema_version", "integer", "count", f"version of this key table ({SCHEMA_VERSION}); changes when a "
          "key is removed or changes meaning or unit, not when one is added"),
        K("spec", "string", "path", "the spec evaluated, as given on the command line", normative=True),
        K("plans", "object", "", "every plan the spec writes (and every plan a comparison names), in written "
          "order", normative=True),
        K(plan, "object", "", "one plan's results", normative=True),
        K(f"{plan}.title", "string", "text", "the plan's title, or its name", "title", normative=True),
        *_metrics(plan, PLAN_METRICS),
        K(f"{plan}.regime", "string", "text", "`latency-bound` or `bandwidth-bound`, by the larger term of T_comm",
          "regime", normative=True),
        K(f"{plan}.phase", "string", "text", ", ".join(f"`{n}`" for n in PHASE_NAMES[:-1])
          + f" or `{PHASE_NAMES[-1]}`", "phase"),
        K(f"{plan}.layout", "object", "", "the plan's parallel layout and choices, as checked", "layout"),
        *[K(f"{plan}.layout.{a.name}", "integer", "count", a.result_doc, a.name, optional=a.optional) for a in AXES],
        *[K(f"{plan}.layout.{f}", t, u, m, f) for f, t, u, m in (
            ("batch", "integer", "count", "sequences per replica"),
            ("seq", "integer|null", "count", "tokens per sequence (null when not given)"),
            ("microbatches", "integer", "count", "pipeline micro-batches"),
            ("fsdp", "boolean", "", "parameters sharded (training)"),
            ("allreduce", "string", "text", "AllReduce algorithm asked for (`auto` picks per message)"),
            ("cross_node", "string", "text", "how groups that span nodes are priced: auto, flat, hierarchical"),
            ("overlap", "number", "fraction", "share of communication hidden behind compute"))],
        *_metrics(plan, ("latency_s",)),
        K(f"{plan}.eta", NUM, "fraction", "scaling efficiency η = T_compute / (T_compute + exposed "
          "communication)", "η"),
        *_metrics(plan, ("throughput_tokens_s", "throughput_per_gpu")),
        K(f"{plan}.tokens_per_step", NUM, "count", "tokens one step produces or processes", "tokens per step",
          integral=True),
        K(f"{plan}.single_gpu_time_s", NUM, "s", "the same work on one GPU, no communication (speedup's base)",
          "single-GPU time"),
        K(f"{plan}.compute", "object", "", "how the compute time was found"),
        K(f"{plan}.compute.bound", "string", "text", "`memory`, `flops` or `given` (the roofline's side, or "
          "`compute_time` given)", "compute bound"),
        K(f"{plan}.compute.memory_time_s", NUM, "s", "bytes read / HBM bandwidth (null when given)",
          "memory time"),
        K(f"{plan}.compute.flop_time_s", NUM, "s", "FLOPs / achieved FLOP/s (null when given)", "FLOP time"),
        K(f"{plan}.compute.stage_time_s", NUM, "s", "one pipeline stage's compute for the whole batch",
          "stage time"),
        K(f"{plan}.compute.bytes_read_per_gpu", NUM, "B", "bytes one GPU reads per step (weights, KV cache)",
          "bytes read per GPU"),
        K(f"{plan}.compute.flops_per_gpu", NUM, "FLOP", "FLOPs one GPU does per step", "FLOPs per GPU"),
        K(f"{plan}.memory", "object", "", "what the memory per GPU is made of"),
        *[K(f"{plan}.memory.{m.key}", NUM, "B", m.meaning, m.label, dim="gb") for m in MEMORY_PARTS],
        # the review's memory table reads the limit against the parts above it
        K(f"{plan}.memory.limit_bytes", NUM, "B", "the policy's usable memory: max_memory × the GPU's memory",
          "memory limit", dim="gb", review="usable (policy)"),
        # each phase's own part of a plan's document (schema.PHASE_KINDS: training, serve)
        *[k for phase in PHASE_KINDS if phase.section for k in _section_keys(plan, phase)],
        K(f"{plan}.volume_bytes_per_step", NUM, "B", "bytes one GPU sends per step", "volume per step"),
        K(f"{plan}.hops_per_step", NUM, "count", "latency steps per step: Σ count·hops", "hops per step",
          integral=True),
        K(f"{plan}.collectives", "array", "", "the collectives of one step, each priced", normative=True),
        K(coll, "object", "", "one kind of collective of the step", normative=True),
        K(f"{coll}.kind", "string", "text", f"{', '.join(KINDS[:-1])} or {KINDS[-1]}", normative=True),
        K(f"{coll}.purpose", "string", "text", "what it carries (tensor-parallel outputs, gradients, ...)",
          normative=True),
        K(f"{coll}.algorithm", "string", "text", ", ".join(ALGORITHM_NAMES), normative=True),
        K(f"{coll}.count", "number", "count", "how many per step", normative=True, integral=True),
        K(f"{coll}.group_size", NUM, "count", "ranks in the group, P", normative=True, integral=True),
        K(f"{coll}.link", "string", "text", "the link it runs on (`a+b` when it spans both)", normative=True),
        K(f"{coll}.message_bytes", NUM, "B", "message m, per GPU", normative=True),
        K(f"{coll}.hops", NUM, "count", "latency steps of one collective", normative=True, integral=True),
        K(f"{coll}.volume_bytes", NUM, "B", "bytes one GPU sends in one collective", normative=True),
        K(f"{coll}.latency_s", NUM, "s", "α·hops of one collective", normative=True),
        K(f"{coll}.bandwidth_s", NUM, "s", "volume / bandwidth of one collective", normative=True),
        K(f"{coll}.time_s", NUM, "s", "one collective: latency + bandwidth", normative=True),
        K(f"{coll}.total_time_s", NUM, "s", "count × time_s"),
        K(f"{coll}.cross_node", "string", "text", "for a group that spans nodes: the model used, flat or "
          "hierarchical", optional=True),
        K(f"{coll}.alternatives", "object", "", "for a group that spans nodes: one collective priced each way "
          "(`split` is the notes' A3 estimate, for comparison only)", optional=True),
        *[K(f"{coll}.alternatives.{alt}", "object", "", f"the collective priced {alt}", optional=True)
          for alt in ("flat", "hierarchical", "split")],
        *[K(f"{coll}.alternatives.{alt}.{f}", NUM, u, m, optional=True, integral=f == "hops")
          for alt in ("flat", "hierarchical", "split")
          for f, u, m in (("hops", "count", "latency steps"), ("volume_bytes", "B", "bytes one GPU sends"),
                          ("latency_s", "s", "α·hops"), ("bandwidth_s", "s", "volume / bandwidth"),
                          ("time_s", "s", "one collective"), ("total_time_s", "s", "count × time_s"))],
        K(f"{coll}.candidates", "object", "", "`allreduce = auto`: the time of one collective under each "
          "algorithm weighed", optional=True),
        K(f"{coll}.candidates.<algorithm>", NUM, "s", "time of one collective with that algorithm",
          optional=True),
        K(f"{coll}.reason", "string", "text", "why `auto` chose this algorithm", optional=True),
        K(f"{coll}.one_shot_alternative", "object", "", "a one-shot AllReduce under the other volume "
          "convention (plan field `one_shot_volume`)", optional=True),
        K(f"{coll}.one_shot_alternative.convention", "string", "text", "`egress` or `ring`: the convention "
          "not charged", optional=True),
        K(f"{coll}.one_shot_alternative.volume_bytes", NUM, "B", "bytes one GPU would send", optional=True),
        K(f"{coll}.one_shot_alternative.time_s", NUM, "s", "one collective", optional=True),
        K(f"{coll}.one_shot_alternative.total_time_s", NUM, "s", "count × time_s", optional=True),
        K(f"{coll}.one_shot_alternative.note", "string", "text", "which convention was charged, in words",
          optional=True),
        K(f"{coll}.note", "string", "text", "a convention that needs saying", optional=True),
        K(f"{plan}.checklist", "array", "", "the estimation checklist: items 1–10 of the notes' section 7, "
          "item 11 memory, item 12 cost", normative=True),
        K(f"{plan}.checklist[]", "object", "", "one item", normative=True),
        K(f"{plan}.checklist[].id", "integer", "count", "item number, 1–12", normative=True),
        K(f"{plan}.checklist[].title", "string", "text", "what the item checks", normative=True),
        K(f"{plan}.checklist[].status", "string", "text", "pass, warn, fail or n/a", normative=True),
        K(f"{plan}.checklist[].value", "number|string|null", "item's", "what was judged, in machine units "
          "(bytes for 1 and 2, seconds for 4, a fraction for 5, 6, 9, 10, 11, USD for 12)", normative=True),
        K(f"{plan}.checklist[].threshold", "number|string|null", "item's", "the limit it was judged against",
          normative=True),
        K(f"{plan}.checklist[].note", "string", "text", "the verdict in a sentence", normative=True),
        # money and power (ccost.model.economics): null where the plan is not priced or no power is known
        K(f"{plan}.cost", "object", "", "the plan's money and power (`ccost.model.economics`)", "cost"),
        K(f"{plan}.cost.priced", "boolean", "", "a price per GPU-hour or node-hour is known", "priced"),
        K(f"{plan}.cost.tokens", "string", "text", "which tokens the cost counts: `output` (decode), `input` "
          "(prefill) or `training`", "tokens"),
        K(f"{plan}.cost.load", "number", "fraction", "the plan's `load`: share of the month it runs at its "
          "throughput", "load"),
        K(f"{plan}.cost.price_per_gpu_hour_usd", NUM, "USD/h", "price of one GPU-hour", "price per GPU-hour"),
        K(f"{plan}.cost.cost_per_hour_usd", NUM, "USD/h", "cost of one hour of the plan: N·p_GPU (+ facility "
          "power × electricity_price)", "cost per hour"),
        K(f"{plan}.cost.cost_per_month_usd", NUM, "USD", "cost of a month of 730 h, paid whatever the load",
          "cost per month", review="per month (730 h)"),
        K(f"{plan}.cost.cost_per_mtok_usd", NUM, "USD", "cost per million tokens (of kind `tokens`) at the "
          "load: cost per hour·10⁶ / (throughput·load·1 h)", "cost per million tokens"),
        K(f"{plan}.cost.cost_per_mtok_output_usd", NUM, "USD", "decode: cost per million output tokens (the "
          "same number as cost_per_mtok_usd)", "cost per million output tokens", optional=True),
        K(f"{plan}.cost.cost_per_mtok_input_usd", NUM, "USD", "prefill: cost per million input (prompt) "
          "tokens (the same number as cost_per_mtok_usd)", "cost per million input tokens", optional=True),
        K(f"{plan}.cost.tokens_per_month", NUM, "count", "tokens served in a month at the load",
          "tokens per month"),
        K(f"{plan}.cost.power_per_gpu_w", NUM, "W", "power per GPU under load (TDP), host share included, "
          "before PUE", "power per GPU"),
        K(f"{plan}.cost.power_w", NUM, "W", "facility power of the plan's GPUs: N·P_GPU·PUE", "power",
          review="power (with PUE)"),
        K(f"{plan}.cost.energy_per_token_j", NUM, "J", "facility energy per token at full load: power / "
          "throughput", "energy per token"),
        K(f"{plan}.cost.tokens_per_joule", NUM, "tokens/J", "tokens per joule of facility energy: throughput / "
          "power", "tokens per joule"),
        K(f"{plan}.cost.note", "string", "text", "why the plan is not priced, and how to price it",
          optional=True),
        # a training target (ccost.model.target): only plans that state one (`train_tokens`, `train_steps`)
        *_target_keys(f"{plan}.target"),
        # sweeps
        K("sweeps", "object", "", "one entry per `sweep` block", optional=True, normative=True),
        K("sweeps.<sweep>", "object", "", "one sweep", optional=True, normative=True),
        K("sweeps.<sweep>.title", "string", "text", "its title, or its name", optional=True),
        K("sweeps.<sweep>.field", "array", "", "the fields varied", optional=True, normative=True),
        K("sweeps.<sweep>.field[]", "string", "text", "a field name", optional=True, normative=True),
        K("sweeps.<sweep>.points", "array", "", "every point, the last field fastest", optional=True,
          normative=True),
        K("sweeps.<sweep>.points[]", "object", "", "one point: the varied fields and the plan's numbers",
          optional=True, normative=True),
        K("sweeps.<sweep>.points[].<field>", "any", "field's", "the value of a varied field (overlap as a "
          "fraction)", optional=True, normative=True),
        *_metrics("sweeps.<sweep>.points[]", POINT_METRICS, optional=True,
                  normative=("step_time_s", "speedup", "efficiency", "overhead")),
        # a phase's figures a sweep point repeats (a bare name finds the plan's serve record first: its
        # labels, short ones included, are there: the section is `scoped`)
        *[K(f"sweeps.<sweep>.points[].{f.name}", f.type, f.unit, f.meaning, f.label, optional=True)
          for phase in PHASE_KINDS for f in phase.sweep_fields],
        K("sweeps.<sweep>.points[].error", "string", "text", "why the point could not be evaluated (then its "
          "numbers are absent)", optional=True),
        # a serving plan's sweep (a phase that is ``ranked_by_objective``): what its optimum is chosen by
        *_metrics("sweeps.<sweep>.points[]", ("throughput_per_gpu",), optional=True, normative=False),
        K("sweeps.<sweep>.points[].cost_per_mtok_usd", "number|null", "USD", "serving plans: cost per million "
          "tokens at the plan's load (null: not priced)", "USD/Mtok", optional=True),
        K("sweeps.<sweep>.points[].meets_policy", "boolean", "", "serving plans: no checklist item fails (what "
          "the optimum is chosen among)", "meets the policy", optional=True),
        *[K(f"sweeps.<sweep>.points[].{k}", NUM, "s", f"{phase.name} plans: {obj}: its {k}", optional=True)
          for phase in PHASE_KINDS for obj, k in phase.latency_keys
          if k not in {f.name for f in phase.sweep_fields}],
        K("sweeps.<sweep>.objective", "string", "text", "serving plans: what picked the optimum "
          "(cost_per_token, throughput_per_gpu, latency, ttft, tpot)", optional=True),
        K("sweeps.<sweep>.optimum", "object|null", "", "serving plans: the best point by the objective among "
          "those that fit memory and meet the policy (null: none does)", "optimum", optional=True),
        K("sweeps.<sweep>.optimum.<field>", "any", "field's", "its value of a varied field", optional=True),
        K("sweeps.<sweep>.optimum_value", NUM, "objective's", "the optimum's value of the objective",
          optional=True),
        K("sweeps.<sweep>.time_optimal", "object|null", "", "the fastest point that fits memory; only for "
          "sweeps that vary a GPU count (tp, pp, ep or dp), else null", "time-optimal point", optional=True,
          normative=True),
        K("sweeps.<sweep>.time_optimal.<field>", "any", "field's", "its value of a varied field",
          optional=True, normative=True),
        K("sweeps.<sweep>.cost_optimal", "object", "", "per efficiency threshold, the point with the most GPUs "
          "that keeps efficiency at or above it; only for sweeps that vary a GPU count, else {}",
          "cost-optimal points", optional=True, normative=True),
        K("sweeps.<sweep>.cost_optimal.<threshold>", "object|null", "", "threshold as a fraction (\"0.7\"); "
          "null when no point reaches it", optional=True, normative=True),
        K("sweeps.<sweep>.cost_optimal.<threshold>.<field>", "any", "field's", "its value of a varied field",
          optional=True, normative=True),
        K("sweeps.<sweep>.continuous_optimum", NUM, "count", "N* = W·ln2/(2·α·c·L·BW) for a tp-only sweep of "
          "a tree decode plan (the notes' model), else null", "continuous optimum N*", optional=True,
          normative=True),
        # comparisons
        K("compares", "object", "", "one entry per `compare` block", optional=True, normative=True),
        K("compares.<compare>", "object", "", "one comparison", optional=True, normative=True),
        K("compares.<compare>.title", "string", "text", "its title, or its name", optional=True),
        K("compares.<compare>.by", "string", "text", "latency, throughput, overhead or efficiency",
          optional=True, normative=True),
        K("compares.<compare>.ranking", "array", "", "the plans, best first by the metric: first those that fit memory and meet the policy, then those that break a policy threshold (a failed checklist item), then those that do not fit memory", optional=True, normative=True),
        K("compares.<compare>.ranking[]", "string", "text", "a plan name", optional=True, normative=True),
        K("compares.<compare>.recommendation", "string", "text", "the choice, its margin and its caveats",
          optional=True, normative=True),
        K("compares.<compare>.values", "object", "", "each plan's value of the ranked metric (latency_s, "
          "throughput_tokens_s, overhead or efficiency)", optional=True),
        K("compares.<compare>.values.<plan>", NUM, "by's", "that plan's value", optional=True),
        # searches
        K("searches", "object", "", "one entry per `search` block", optional=True),
        K("searches.<search>", "object", "", "one search", optional=True),
        K("searches.<search>.title", "string", "text", "its title, or its name", optional=True),
        K("searches.<search>.base", "string", "text", "the plan whose layouts are searched", optional=True),
        K("searches.<search>.axes", "object", "", "the values searched, per field", optional=True),
        K("searches.<search>.axes.<field>", "array", "", "one field's values", optional=True),
        K("searches.<search>.axes.<field>[]", "any", "field's", "a value (a model, cluster or stack by its "
          "name)", optional=True),
        K("searches.<search>.objective", "string", "text", "what ranks the layouts", optional=True),
        K("searches.<search>.distinct", "boolean", "", "`top` lists each answer once (a layout with the "
          "latency, throughput per GPU and cost of a better-ranked one is left out)", optional=True),
        K("searches.<search>.points", "integer", "count", "layouts in the search space", optional=True),
        K("searches.<search>.priced", "integer", "count", "layouts that passed the layout constraints and were "
          "priced", optional=True),
        K("searches.<search>.feasible", "integer", "count", "layouts that passed every constraint",
          optional=True),
        K("searches.<search>.rejected", "integer", "count", "points − feasible", optional=True),
        K("searches.<search>.constraints", "array", "", "each constraint, in the order applied", optional=True),
        K("searches.<search>.constraints[]", "object", "", "one constraint", optional=True),
        K("searches.<search>.constraints[].constraint", "string", "text", "its name", optional=True),
        K("searches.<search>.constraints[].rule", "string", "text", "the rule, in words", optional=True),
        K("searches.<search>.constraints[].tested", "integer", "count", "layouts it was applied to",
          optional=True),
        K("searches.<search>.constraints[].failed", "integer", "count", "layouts that broke it", optional=True),
        K("searches.<search>.constraints[].removed", "integer", "count", "layouts it alone removed (they add "
          "up to `rejected`)", optional=True),
        K("searches.<search>.constraints[].threshold", "number|boolean|null", "constraint's", "its limit "
          "(max_gpus a count; max_overhead and min_efficiency fractions)", optional=True),
        K("searches.<search>.constraints[].limit_bytes", NUM, "B", "fits_memory: the usable memory per GPU (absent when the searched clusters' GPUs differ)",
          optional=True, dim="gb"),
        K("searches.<search>.constraints[].best_removed", "object", "", "the best layout it removed (a layout "
          "record, below)", optional=True),
        K("searches.<search>.top", "array", "", "the best layouts by the objective, best first",
          optional=True),
        K("searches.<search>.pareto", "array", "", "the latency / throughput-per-GPU Pareto front, fastest "
          "first", optional=True),
    ]
    srch = "searches.<search>.target"
    keys += [
        K(srch, "object", "", "a search whose base plan states a training target: the target, and the Pareto "
          "front of time to train against the run's cost", optional=True),
        K(f"{srch}.train_tokens", NUM, "count", "the base plan's `train_tokens`", "tokens to train", optional=True),
        K(f"{srch}.train_steps", "integer|null", "count", "the base plan's `train_steps`", "steps", optional=True),
        K(f"{srch}.global_batch", NUM, "count", "the base plan's global batch in sequences (null: each layout's "
          "own batch)", "global batch", optional=True, integral=True),
        K(f"{srch}.deadline_s", NUM, "s", "the base plan's `deadline` (the meets_deadline constraint)",
          "deadline", optional=True),
        K(f"{srch}.gpu_budget", "integer|null", "count", "the base plan's `gpu_budget` (caps max_gpus)",
          "GPU budget", optional=True),
        K(f"{srch}.pareto_by", "string", "text", "what the front weighs the time to train against: "
          "`train_cost_usd`, or `gpu_days` when a searched cluster is not priced", "front against",
          optional=True),
        K(f"{srch}.pareto", "array", "", "the layouts no other beats in both time to train and cost (or "
          "GPU-days), soonest first", optional=True),
        K(f"{srch}.best_per_fleet", "array", "", "a search with fleet axes (model, cluster, phase, stack): the best "
          "layout of each of their combinations by the objective, in search order (\"B200 or H100?\")",
          optional=True),
    ]
    for rec in ("searches.<search>.top[]", "searches.<search>.pareto[]",
                "searches.<search>.constraints[].best_removed", f"{srch}.pareto[]", f"{srch}.best_per_fleet[]"):
        if rec.endswith("[]"):
            keys.append(K(rec, "object", "", "a layout record", optional=True))
        keys += [
            K(f"{rec}.<field>", "any", "field's", "the layout's value of a searched field (a model, cluster or "
              "stack by its name)", optional=True),
            *_metrics(rec, RECORD_METRICS, optional=True, normative=False),
            K(f"{rec}.tp_algorithm", "string|null", "text", "the algorithm the TP AllReduce used (what `auto` "
              "picked); null for a one-GPU group", optional=True),
            K(f"{rec}.dp_algorithm", "string|null", "text", "training: the algorithm of the DP gradient "
              "AllReduce", optional=True),
            K(f"{rec}.cost_per_mtok_usd", "number", "USD", "cost per million tokens at the base plan's load "
              "(the plan's `cost.cost_per_mtok_usd`); only when the cluster is priced", optional=True),
            *_target_record_keys(rec),
        ]
    keys += _capacity_keys(K)
    # byte sizes and integer keys are whole: written as integers whatever their float value
    return [replace(k, integral=True) if k.unit == "B" or k.type.startswith("integer") else k for k in keys]


#: The latencies of a fleet a capacity search screened or simulated: (key, meaning, label).
_FLEET_LATENCIES = tuple((f"{m}_{q}_s", f"{what}, {q} at the sized rate", f"{lab} {q}")
                         for m, what, lab in (("ttft", "time to first token", "TTFT"),
                                              ("tpot", "time per output token", "TPOT"),
                                              ("e2e", "request latency", "E2E"))
                         for q in ("p50", "p99"))
#: What a capacity search varies: the columns of a fleet, each a key of its record (the language's check of a
#: capacity search, ``ccost.check.search``, the search itself, ``ccost.capacity``, and the writers read this).
FLEET_COLUMNS = ("cluster", "tp", "pp", "ep", "dp", "max_seqs", "step_tokens", "prefill_workers", "decode_workers",
                 "prefill_tp")
#: A replica's layout: a fleet less its replica count (the fleets that differ only in ``dp``).
REPLICA_COLUMNS = tuple(c for c in FLEET_COLUMNS if c != "dp")
#: Where a capacity search lists fleets (each a fleet record, ``_fleet_keys``).
FLEET_RECORDS = ("chosen", "aggregated", "disaggregated", "n_plus_1", "n_plus_1.one_down", "confirmations[]",
                 "pareto[]", "fleets[]", "growth.fleet", "growth.same_layout")


def _capacity_keys(K) -> list[Key]:
    """The document of a capacity search (``ccost.capacity``: a search whose base is an online plan)."""
    S_ = "searches.<search>"
    keys = [
        K(f"{S_}.kind", "string", "text", "`capacity`: a search for the fleet that carries the base's traffic "
          "within the SLOs (absent: a layout search)", optional=True),
        K(f"{S_}.traffic", "string", "text", "capacity: the traffic the fleet is sized for", optional=True),
        K(f"{S_}.rate_per_s", NUM, "1/s", "capacity: the traffic's mean rate", optional=True),
        K(f"{S_}.peak_rate_per_s", NUM, "1/s", "capacity: the traffic's peak rate", optional=True),
        K(f"{S_}.headroom", "number", "fraction", "capacity: the share above the peak the fleet is sized for",
          optional=True),
        K(f"{S_}.sized_rate_per_s", "number", "1/s", "capacity: peak × (1 + headroom), the rate every fleet is "
          "screened and simulated at", optional=True, label="sized rate"),
        K(f"{S_}.slo_percentile", "string", "text", "capacity: the percentile the SLOs hold at", optional=True),
        K(f"{S_}.max_ttft_s", NUM, "s", "capacity: the policy's TTFT limit (null: none)", optional=True),
        K(f"{S_}.max_tpot_s", NUM, "s", "capacity: the policy's TPOT limit (null: none)", optional=True),
        K(f"{S_}.max_e2e_s", NUM, "s", "capacity: the policy's request-latency limit (null: none)", optional=True),
        K(f"{S_}.min_slo_goodput", NUM, "fraction", "capacity: the policy's SLO goodput share (null: none)",
          optional=True),
        K(f"{S_}.candidates", "integer", "count", "capacity: fleets screened (every combination that can run)",
          optional=True),
        K(f"{S_}.dropped", "object", "", "capacity: combinations left out before screening, by reason",
          optional=True),
        K(f"{S_}.dropped.<reason>", "integer", "count", "layout_rules, kv_cache (an engine cannot hold the "
          "longest request beside its weights), max_gpus, budget_below_max_seqs", optional=True),
        K(f"{S_}.stable", "integer", "count", "capacity: fleets the screen finds keeping up at the sized rate",
          optional=True),
        K(f"{S_}.meeting", "integer", "count", "capacity: fleets the screen finds within every SLO limit",
          optional=True),
        K(f"{S_}.simulations", "integer", "count", "capacity: fleets simulated to confirm the screen",
          optional=True),
        K(f"{S_}.screen_disagreements", "integer", "count", "capacity: simulated fleets whose verdict differs "
          "from the screen's", optional=True),
        K(f"{S_}.method", "string", "text", "capacity: how the figures were obtained", optional=True),
        K(f"{S_}.chosen", "object|null", "", "capacity: the fleet to buy: the better of the aggregated and "
          "the disaggregated pick by the objective, confirmed by simulation (null: none meets the SLOs)",
          optional=True),
        K(f"{S_}.aggregated", "object|null", "", "capacity: the best aggregated fleet confirmed by simulation",
          optional=True),
        K(f"{S_}.disaggregated", "object|null", "", "capacity: the best disaggregated fleet confirmed by "
          "simulation", optional=True),
        K(f"{S_}.n_plus_1", "object|null", "", "capacity: the cheapest fleet that meets the SLOs with one "
          "replica down (its one-down fleet simulated)", optional=True),
        K(f"{S_}.n_plus_1.one_down", "object", "", "the same fleet with one replica fewer, simulated",
          optional=True),
        K(f"{S_}.confirmations", "array", "", "capacity: every fleet simulated, in the order simulated",
          optional=True),
        K(f"{S_}.fleets", "array", "", "capacity: the best fleets the screen finds within the SLOs, by the "
          "objective", optional=True),
        K(f"{S_}.layouts", "array", "", "capacity: per engine layout (aggregated) or worker mix "
          "(disaggregated), the highest rate one replica carries within the SLOs (screened)", optional=True),
        K(f"{S_}.layouts[]", "object", "", "one layout", optional=True),
        *[K(f"{S_}.layouts[].{n}", t, u, m, optional=True) for n, t, u, m in (
            ("cluster", "string", "text", "the cluster"), ("tp", "integer", "count", "tensor-parallel degree"),
            ("pp", "integer", "count", "pipeline stages"), ("ep", "integer", "count", "expert-parallel degree"),
            ("mode", "string", "text", "`aggregated` or `disaggregated`"),
            ("prefill_workers", "integer", "count", "prefill workers of a replica (0: aggregated)"),
            ("decode_workers", "integer", "count", "decode workers of a replica (0: aggregated)"),
            ("prefill_tp", "integer", "count", "the prefill workers' tp (0: aggregated)"),
            ("gpus", "integer", "count", "GPUs of one replica"),
            ("max_seqs", "integer", "count", "the max_seqs that carries the most"),
            ("step_tokens", "integer", "count", "the step_tokens that carries the most"),
            ("highest_rate_per_s", NUM, "1/s", "the highest rate one replica carries within the SLOs "
             "(screened)"),
            ("replicas_for_rate", "integer|null", "count", "replicas the sized rate needs at that rate each"))],
    ]
    keys += [K(f"{S_}.growth", "object|null", "", "capacity: what the traffic grown by `factor` would need "
               "(screened, every candidate again)", optional=True),
             K(f"{S_}.growth.factor", "number", "fraction", "the growth: 1.5", optional=True),
             K(f"{S_}.growth.rate_per_s", "number", "1/s", "the sized rate × factor", optional=True),
             K(f"{S_}.growth.fleet", "object|null", "", "the cheapest fleet that carries it (null: none in the "
               "search)", optional=True),
             K(f"{S_}.growth.same_layout", "object|null", "", "the chosen fleet's layout and engine limits with the "
               "fewest replicas that carry it (null: none in the search)", optional=True)]
    for rec in FLEET_RECORDS:
        p = f"{S_}.{rec}"
        if rec.endswith("[]"):
            keys.append(K(p, "object", "", "a fleet record (a layout record in a layout search's pareto)",
                          optional=True))
        keys += [K(f"{p}.{n}", t, u, m, optional=True) for n, t, u, m in (
            ("cluster", "string", "text", "fleet: the cluster (GPU type)"),
            ("tp", "integer", "count", "fleet: tensor-parallel degree (of the decode workers)"),
            ("pp", "integer", "count", "fleet: pipeline stages"), ("ep", "integer", "count", "fleet: expert-parallel "
                                                                   "degree"),
            ("dp", "integer", "count", "fleet: replicas"), ("max_seqs", "integer", "count", "fleet: running "
                                                            "requests per engine at most"),
            ("step_tokens", "integer", "count", "fleet: tokens per engine step at most"),
            ("prefill_workers", "integer", "count", "fleet: prefill workers per replica (0: aggregated)"),
            ("decode_workers", "integer", "count", "fleet: decode workers per replica (0: aggregated)"),
            ("prefill_tp", "integer", "count", "fleet: the prefill workers' tp (0: aggregated)"),
            ("mode", "string", "text", "fleet: `aggregated` or `disaggregated`"),
            ("cost_per_month_usd", "number", "USD", "fleet: cost of a month (absent: not priced)"))]
        keys += [K(f"{p}.screened", "object", "", "fleet: the screen's figures at the sized rate", optional=True),
                 *[K(f"{p}.screened.{n}", NUM, "s", m, lab, optional=True) for n, m, lab in _FLEET_LATENCIES],
                 K(f"{p}.screened.stable", "boolean", "", "the screen finds the fleet keeping up", optional=True),
                 K(f"{p}.screened.utilisation", NUM, "fraction", "an engine's busy share (screened)", optional=True),
                 K(f"{p}.simulated", "object|null", "", "fleet: the simulator's figures at the sized rate (null: "
                   "not simulated)", optional=True),
                 *[K(f"{p}.simulated.{n}", NUM, "s", m, lab, optional=True) for n, m, lab in _FLEET_LATENCIES],
                 *[K(f"{p}.simulated.{m}_slo_s", NUM, "s", f"{m.upper()} at the SLO's percentile", optional=True)
                   for m in ("ttft", "tpot", "e2e")],
                 K(f"{p}.simulated.goodput_share", NUM, "fraction", "share of requests meeting every limit",
                   optional=True),
                 K(f"{p}.simulated.utilisation", NUM, "fraction", "an engine's busy share", optional=True),
                 K(f"{p}.simulated.stable", "boolean", "", "the engines keep up", optional=True),
                 K(f"{p}.simulated.meets", "boolean", "", "every SLO limit holds and the engines keep up",
                   optional=True),
                 K(f"{p}.simulated.requests", "integer", "count", "requests measured", optional=True),
                 K(f"{p}.simulated.slo_ratio", NUM, "ratio", "the worst of each SLO figure over its limit (above "
                   "1: it misses; null: no SLO, or no request met them)", optional=True)]
        if rec in ("chosen", "aggregated", "disaggregated"):  # what to launch it with (ccost.launch)
            keys += [K(f"{p}.capacity_per_s", NUM, "1/s", "fleet: the highest rate it carries within the SLOs "
                       "(screened; null: none found)", optional=True),
                     K(f"{p}.headroom", NUM, "fraction", "fleet: capacity / sized rate − 1 (screened; below 0 when "
                       "the simulation confirmed a fleet the screen put just short)", optional=True)]
            L = f"{p}.launch"
            keys += [K(L, "object", "", "fleet: the engine launch settings it assumes and a benchmark that replays "
                       "the demand (`ccost export`)", optional=True),
                     K(f"{L}.engines", "array", "", "per kind of engine (serve; or prefill and decode)", optional=True),
                     K(f"{L}.engines[]", "object", "", "one kind of engine", optional=True),
                     *[K(f"{L}.engines[].{n}", t, u, m, optional=True) for n, t, u, m in (
                         ("role", "string", "text", "`serve`, `prefill` or `decode`"),
                         ("count", "integer", "count", "engines of this kind in the fleet"),
                         ("tp", "integer", "count", "tensor-parallel size"), ("pp", "integer", "count",
                                                                             "pipeline-parallel size"),
                         ("ep", "integer", "count", "expert-parallel ranks (each its own sequences)"),
                         ("max_seqs", "integer", "count", "running requests per engine: vLLM --max-num-seqs, "
                          "SGLang --max-running-requests"),
                         ("step_tokens", "integer", "count", "tokens a step: vLLM --max-num-batched-tokens, SGLang "
                          "--chunked-prefill-size"),
                         ("vllm", "string", "text", "the `vllm serve` command of one engine"),
                         ("sglang", "string", "text", "the SGLang `launch_server` command of one engine"))],
                     K(f"{L}.note", "string", "text", "how the engines are put together", optional=True),
                     K(f"{L}.benchmark", "string", "text", "`vllm bench serve` replaying the traffic at the sized "
                       "rate", optional=True),
                     K(f"{L}.model", "string", "text", "what `$MODEL` stands for", optional=True)]
        if rec != "pareto[]":  # a layout search's records already declare these two
            keys += [K(f"{p}.gpus", "integer", "count", "fleet: GPUs", optional=True),
                     K(f"{p}.cost_per_mtok_usd", "number", "USD", "fleet: cost per million output tokens the "
                       "traffic asks for at its mean rate (absent: not priced)", optional=True)]
    return keys


def _target_keys(t: str) -> list[Key]:
    """The ``target`` section of a plan with a training target (``ccost.model.target``)."""
    K = Key
    keys = [
        K(t, "object", "", "the plan's training target: time to train, goodput at scale, GPU-days, energy and "
          "cost (`ccost.model.target`); only when the plan states `train_tokens` or `train_steps`", "target",
          optional=True),
        K(f"{t}.train_tokens", NUM, "count", "tokens to train on (`train_tokens`; null when the target is "
          "`train_steps`)", "tokens to train"),
        K(f"{t}.train_steps", NUM, "count", "optimizer steps: ⌈train_tokens / tokens_per_step⌉, or "
          "`train_steps`", "steps", integral=True),
        K(f"{t}.global_batch", NUM, "count", "sequences per step over all replicas, when the plan fixes it "
          "(`global_batch`, or `global_batch_tokens` / seq)", "global batch", integral=True),
        K(f"{t}.tokens_per_step", NUM, "count", "tokens per optimizer step: dp·ep·batch·seq", "tokens per step",
          integral=True),
        K(f"{t}.ideal_time_s", NUM, "s", "training time without interruptions: steps × step time",
          "time without interruptions"),
        K(f"{t}.goodput_modelled", "boolean", "", "the cluster gives `checkpoint_bandwidth`, so interruptions "
          "are modelled (else the goodput is 1 and W309 says so)", "goodput modelled"),
        K(f"{t}.checkpoint_bytes", NUM, "B", "one checkpoint: weights + optimizer state, each byte once "
          "(W + N_params·b_opt)", "checkpoint size", dim="gb"),
        K(f"{t}.checkpoint_time_s", NUM, "s", "writing it at the cluster's checkpoint_bandwidth, training "
          "blocked (δ)", "checkpoint write"),
        K(f"{t}.failure_rate_per_gpu_hour", NUM, "1/h", "job interruptions per GPU-hour (the cluster's "
          "`failure_rate`)", "interruptions per GPU-hour", dim="count"),
        K(f"{t}.mtbf_s", NUM, "s", "mean time between interruptions of the job: 1/(GPUs × rate) (M)",
          "time between interruptions"),
        K(f"{t}.restart_time_s", NUM, "s", "from an interruption to training again (the cluster's "
          "`restart_time`, R)", "restart time"),
        K(f"{t}.checkpoint_interval_s", NUM, "s", "training time between checkpoints: Daly's higher-order "
          "optimum, or the plan's `checkpoint_interval` (τ)", "checkpoint interval"),
        K(f"{t}.young_interval_s", NUM, "s", "Young's first-order interval √(2·δ·M), for comparison",
          "Young's interval"),
        K(f"{t}.goodput", NUM, "fraction", "expected share of the run's time that trains the model (Daly 2006): "
          "τ / (M·e^(R/M)·(e^((τ+δ)/M) − 1)); 1 when not modelled", "goodput"),
        K(f"{t}.time_to_train_s", NUM, "s", "time to train at the goodput: ideal time / goodput",
          "time to train"),
        K(f"{t}.gpu_days", NUM, "count", "GPUs × time to train, in days", "GPU-days"),
        K(f"{t}.energy_j", NUM, "J", "facility energy of the run: the plan's power (PUE included) × time to "
          "train (null without a power)", "energy"),
        K(f"{t}.cost_usd", NUM, "USD", "cost of the run: cost per hour × time to train, the GPUs paid "
          "throughout (null when not priced)", "cost"),
        K(f"{t}.interruptions", NUM, "count", "interruptions expected during the run: time to train / M",
          "interruptions"),
        K(f"{t}.checkpoints", NUM, "count", "checkpoints written: ideal time / τ", "checkpoints"),
        K(f"{t}.checkpoint_writing_s", NUM, "s", "the run's time writing checkpoints: checkpoints × δ",
          "writing checkpoints"),
        K(f"{t}.restarting_s", NUM, "s", "the run's time restarting: interruptions × R", "restarting"),
        K(f"{t}.lost_work_s", NUM, "s", "work re-done after interruptions (and checkpoints they cut short): "
          "time to train − ideal time − checkpoint writing − restarting", "re-done work"),
        K(f"{t}.deadline_s", NUM, "s", "the plan's `deadline` (checklist item 13)", "deadline"),
        K(f"{t}.meets_deadline", "boolean|null", "", "time to train ≤ deadline (null without one)",
          "meets the deadline"),
        K(f"{t}.gpu_budget", "integer|null", "count", "the plan's `gpu_budget` (checklist item 13)",
          "GPU budget"),
        K(f"{t}.sources", "object", "", "where each input of the goodput came from", "sources"),
        *[K(f"{t}.sources.{f}", "string", "text", f"the source of {what}", what) for f, what in (
            ("failure_rate", "the failure rate"), ("restart_time", "the restart time"),
            ("checkpoint_bandwidth", "the checkpoint bandwidth"), ("checkpoint_interval", "the interval"))],
        K(f"{t}.doubled", "object", "", "the plan on twice the GPUs with the global batch held (dp doubled, "
          "batch per replica halved; the cluster's kind with more nodes when needed)", "twice the GPUs"),
        K(f"{t}.doubled.note", "string", "text", "what changed, or why the plan cannot be doubled",
          "what changed"),
    ]
    for f, typ, u, m, lab in (
            ("gpus", "integer", "count", "its GPUs", "GPUs"), ("dp", "integer", "count", "its dp", "dp"),
            ("batch", "integer", "count", "its batch per replica", "batch"),
            ("microbatches", "integer", "count", "its micro-batches", "microbatches"),
            ("step_time_s", NUM, "s", "its step time", "step time"),
            ("goodput", NUM, "fraction", "its goodput", "goodput"),
            ("ideal_time_s", NUM, "s", "its training time without interruptions", "time without interruptions"),
            ("checkpoint_writing_s", NUM, "s", "its time writing checkpoints", "writing checkpoints"),
            ("restarting_s", NUM, "s", "its time restarting", "restarting"),
            ("lost_work_s", NUM, "s", "its re-done work", "re-done work"),
            ("time_to_train_s", NUM, "s", "its time to train", "time to train"),
            ("gpu_days", NUM, "count", "its GPU-days", "GPU-days"), ("energy_j", NUM, "J", "its energy", "energy"),
            ("cost_usd", NUM, "USD", "its cost", "cost"),
            ("meets_deadline", "boolean|null", "", "it meets the deadline", "meets the deadline")):
        keys.append(K(f"{t}.doubled.{f}", typ, u, m, lab, optional=True))
    return keys


def _target_record_keys(rec: str) -> list[Key]:
    """What a search record adds when the base plan states a training target (``ccost.search``)."""
    K = Key
    return [
        K(f"{rec}.batch", "integer", "count", "the batch per replica a fixed global batch gives the layout: "
          "global batch / (dp·ep)", "batch", optional=True),
        K(f"{rec}.microbatches", "integer", "count", "the micro-batches a fixed microbatch_size gives it: "
          "batch / microbatch_size", "microbatches", optional=True),
        K(f"{rec}.time_to_train_s", "number", "s", "time to train the base plan's target on this layout",
          "time to train", optional=True, short="to train"),
        K(f"{rec}.goodput", "number", "fraction", "its expected goodput", "goodput", optional=True),
        K(f"{rec}.checkpoint_interval_s", "number", "s", "its checkpoint interval (Daly's optimum)",
          "checkpoint interval", optional=True),
        K(f"{rec}.gpu_days", "number", "count", "its GPU-days", "GPU-days", optional=True),
        K(f"{rec}.train_energy_j", "number", "J", "its facility energy", "energy", optional=True),
        K(f"{rec}.train_cost_usd", "number", "USD", "the cost of the run (priced clusters only)", "cost",
          optional=True, short="run cost"),
    ]


KEYS: tuple[Key, ...] = tuple(_keys())
BY_PATH: dict[str, Key] = {k.path: k for k in KEYS}

#: Where a key named by itself (``step_time_s``, ``serve.ttft_s``, ``time_s``) is looked up, in turn.
SCOPES = ("plans.<plan>", "plans.<plan>.layout",
          *(f"plans.<plan>.{phase.section}" for phase in PHASE_KINDS if phase.section and phase.scoped),
          "plans.<plan>.collectives[]", "sweeps.<sweep>.points[]", "searches.<search>.top[]",
          "searches.<search>.constraints[]", "searches.<search>", "plans.<plan>.target")


def record(key: str) -> Key | None:
    """The record of a key named by its path below a plan, a collective, a sweep point or a search record
    (the names the writers use), else by its whole path (``sweeps.<sweep>.time_optimal``), or None."""
    for scope in SCOPES:
        k = BY_PATH.get(f"{scope}.{key}")
        if k is not None:
            return k
    return BY_PATH.get(key)


def label_in(key: str, context: str = "label") -> str:
    """``key``'s label in ``context`` (see Key); a key without a record: the key, unit suffix dropped."""
    k = record(key)
    return k.label_in(context) if k is not None else key.removesuffix("_s").replace("_", " ")


def integral_names() -> frozenset[str]:
    """The last segments of the integral keys: ccost.output writes their whole values as integers."""
    return frozenset(k.name for k in KEYS if k.integral)

# ---------------------------------------------------------------------------------------------------
# Labels for people (ccost diff): the plan-level keys by their last segment.

def label(key: str) -> str:
    """``step_time_s`` → ``step time``; ``memory.kv_cache_bytes`` → ``KV cache``; unknown keys unchanged
    but for underscores (ccost diff)."""
    return label_in(key)


# ---------------------------------------------------------------------------------------------------
# JSON Schema

_JSON_TYPES = {"number", "integer", "string", "boolean", "null", "object", "array"}


def _type_schema(t: str) -> dict:
    if t == "any":
        return {"type": ["number", "string", "boolean", "null"]}
    types = t.split("|")
    assert set(types) <= _JSON_TYPES, t
    return {"type": types[0] if len(types) == 1 else types}


def _split(path: str) -> list[str]:
    out = []
    for seg in path.split("."):
        if seg.endswith("[]"):
            out += [seg[:-2], "[]"]
        else:
            out.append(seg)
    return out


def json_schema() -> dict:
    """The JSON Schema (draft 2020-12) of the results document, built from ``KEYS``."""
    tree: dict = {}
    for k in KEYS:
        node = tree
        for seg in _split(k.path):
            node = node.setdefault(seg, {})
        node.setdefault("__key__", k)

    def build(name: str, node: dict) -> dict:
        k: Key | None = node.get("__key__")
        children = {s: n for s, n in node.items() if s != "__key__"}
        if "[]" in children:
            schema = {"type": "array", "items": build("[]", children["[]"])}
        elif children:
            fixed = {s: n for s, n in children.items() if not s.startswith("<")}
            free = [n for s, n in children.items() if s.startswith("<")]
            schema = {"type": "object" if k is None or "null" not in k.type else ["object", "null"],
                      "properties": {s: build(s, n) for s, n in fixed.items()},
                      "additionalProperties": build("<>", free[0]) if free else False}
            required = [s for s, n in fixed.items() if n.get("__key__") is not None
                        and not n["__key__"].optional and not _all_optional(n)]
            if required:
                schema["required"] = required
        else:
            assert k is not None, name
            schema = _type_schema(k.type)
        if k is not None:
            schema["description"] = k.meaning + (f" [{k.unit}]" if k.unit and k.unit not in ("text", "") else "")
        return schema

    out = {"$schema": "https://json-schema.org/draft/2020-12/schema",
           "title": f"ccost results document, schema version {SCHEMA_VERSION}",
           "description": "What `ccost eval --format json|yaml` prints (docs/interface.md). Times in seconds, "
                          "sizes in bytes, shares as fractions."}
    out.update(build("", tree))
    return out


def _all_optional(node: dict) -> bool:
    k = node.get("__key__")
    return k is not None and k.optional


# ---------------------------------------------------------------------------------------------------
# Markdown for docs/interface.md

def markdown() -> str:
    """The key table of docs/interface.md: every key with its type, unit and meaning."""
    lines = [f"Schema version {SCHEMA_VERSION}. `*` marks the normative keys, those of the interface ccost was "
             "designed to; (optional) keys are "
             "absent where they do not apply.", "",
             "| key | type | unit | meaning |", "|---|---|---|---|"]
    for k in KEYS:
        mark = " *" if k.normative else ""
        opt = " (optional)" if k.optional and not _parent_optional(k) else ""
        meaning = k.meaning.replace("|", "\\|") + opt
        lines.append(f"| `{k.path}`{mark} | {k.type.replace('|', ' or ')} | {k.unit or '—'} | {meaning} |")
    return "\n".join(lines) + "\n"


def _parent_optional(k: Key) -> bool:
    segs = k.path.rsplit(".", 1)
    parent = BY_PATH.get(segs[0]) if len(segs) == 2 else None
    return parent is not None and parent.optional


BEGIN, END = "<!-- result-keys:begin -->\n", "<!-- result-keys:end -->"


def update_doc(path: str) -> bool:
    """Rewrite the key table between the ``result-keys`` markers of ``path`` (docs/interface.md); returns
    whether the file changed."""
    from pathlib import Path

    p = Path(path)
    text = p.read_text(encoding="utf-8")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    new = head + BEGIN + markdown() + END + tail
    if new != text:
        p.write_text(new, encoding="utf-8")
    return new != text


if __name__ == "__main__":  # python -m ccost.results docs/interface.md
    import sys

    if len(sys.argv) != 2:
        print("usage: python -m ccost.results docs/interface.md", file=sys.stderr)
        raise SystemExit(2)
    print(("updated " if update_doc(sys.argv[1]) else "already current: ") + sys.argv[1])


# ---------------------------------------------------------------------------------------------------
# Values as people read them (``ccost eval``'s text, the review, ``ccost diff``), by dimension.

def fmt_time(x: float | None) -> str:
    return "—" if x is None else units.format_quantity(x, units.TIME)


def fmt_bytes(x: float | None) -> str:
    return "—" if x is None else units.format_quantity(x, units.INFORMATION)


def fmt_gb(x: float | None) -> str:
    """Memory in decimal units, to compare with capacities (80 GB)."""
    return "—" if x is None else units.format_quantity(x, units.INFORMATION, binary=False)


def fmt_pct(x: float | None) -> str:
    return "—" if x is None else units.format_percent(x)


def slo_figures(percentile: str, figures: dict, limits: dict, goodput: float | None = None,
                min_goodput: float | None = None) -> list[tuple[str, bool]]:
    """Each SLO a policy states against its figure, in words, and whether it is missed:
    ``("TPOT p99 32.05 ms > 30 ms", True)``. ``figures`` and ``limits`` map ``ttft``/``tpot``/``e2e`` to
    seconds (a figure None: not measured, or infinite, which misses); the goodput share against its least.
    An online plan's checklist item 15 and a capacity search's rejected fleets write their SLOs with it."""
    out = []
    for m, label in (("ttft", "TTFT"), ("tpot", "TPOT"), ("e2e", "E2E")):
        limit, got = limits.get(m), figures.get(m)
        if limit is None:
            continue
        ok = got is not None and got <= limit
        out.append((f"{label} {percentile} {fmt_time(got)} {'≤' if ok else '>'} {fmt_time(limit)}", not ok))
    if min_goodput is not None:
        ok = goodput is not None and goodput >= min_goodput
        out.append((f"goodput {fmt_pct(goodput)} {'≥' if ok else '<'} {fmt_pct(min_goodput)}", not ok))
    return out


def fmt_num(x: float | None, digits: int = 4) -> str:
    if x is None:
        return "—"
    return units.format_quantity(x, units.DIMENSIONLESS, digits=digits)
