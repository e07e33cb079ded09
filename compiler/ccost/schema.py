"""The schema of the .ccost language, as data: block kinds, their fields, dimensions, defaults, docs.

One table drives everything that needs to know the language (principle: the schema is data):

* the checker (``ccost.check``) reads the field types, ranges, defaults and required-ness from here;
* did-you-mean hints for unknown fields compare against the field names here;
* ``ccost schema`` and the committed ``docs/language.md`` are generated from here (a test keeps the file in
  step: regenerate with ``ccost schema > docs/language.md``).

Adding a block kind (the search engineer's ``search``, say) is one ``register(BlockKind(...))`` call with
its fields and its entity, the frozen ``ccost.spec`` dataclass that also holds the fields' defaults (one
place: ``register`` copies them here, and refuses a kind ``Spec`` cannot hold); the checker, the parser (its
keyword terminals and ``kind`` rule are filled in from ``block_kinds()``) and the Pygments lexer need no
change. A
kind that sweeps over another kind's fields (``sweep`` over ``plan``) sets ``varies``.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Callable, Mapping

from ccost import layout_rules as rules
from ccost import spec as S
from ccost.axes import AXES, Axis, label
from ccost.collectives import KINDS
from ccost import units as U
from ccost.units import Dim

# --------------------------------------------------------------------------------------------------
# Field types


@dataclass(frozen=True)
class FieldType:
    """What a field holds.

    ``kind`` is one of: ``quantity`` (a number of dimension ``dim``), ``int`` (a whole plain number),
    ``count`` (a plain number that need not be whole, like ``params = 70.6e9``), ``fraction`` (a plain number
    or ``%``), ``string``, ``bool``, ``enum`` (one of ``values``, written bare: ``phase = decode``), ``ref``
    (the name of a block of kind ``ref``), ``list`` (of ``item``).
    """

    kind: str
    dim: Dim = ()
    values: tuple[str, ...] = ()
    ref: str | None = None
    item: "FieldType | None" = None

    @property
    def numeric(self) -> bool:
        return self.kind in ("quantity", "int", "count", "fraction")

    @property
    def needs_dim(self) -> Dim:
        """The dimension a numeric value of this type must have."""
        return self.dim if self.kind == "quantity" else U.DIMENSIONLESS

    def describe(self) -> str:
        """Short phrase for messages and docs: 'a time', 'a whole number', 'one of ring, tree, ...'."""
        if self.kind == "quantity":
            return U.dim_name(self.dim)
        if self.kind == "int":
            return "a whole number"
        if self.kind == "count":
            return "a plain number (a count)"
        if self.kind == "fraction":
            return "a fraction (a plain number or %)"
        if self.kind == "string":
            return 'a string in double quotes'
        if self.kind == "bool":
            return "true or false"
        if self.kind == "enum":
            return "one of " + ", ".join(self.values)
        if self.kind == "ref":
            return f"the name of a {self.ref} block"
        if self.kind == "list":
            assert self.item is not None
            return "a list of " + _plural(self.item)
        return self.kind

    def doc_type(self) -> str:
        """Markdown for the docs' type column."""
        if self.kind == "quantity":
            # money and power in the units a reader prices in (USD/h, not the SI USD/s inside)
            return {U.TIME: "time", U.INFORMATION: "information", U.BANDWIDTH: "information/time",
                    U.FLOP_RATE: "compute/time", U.COMPUTE: "compute", U.MONEY_RATE: "money/time (USD/h)",
                    U.ENERGY_PRICE: "money/energy (USD/kWh)", U.POWER: "power (W)",
                    U.MONEY: "money (USD)", U.RATE: "1/time"}.get(self.dim, U.unit_of_dim(self.dim))
        if self.kind == "enum":
            return " \\| ".join(f"`{v}`" for v in self.values)
        if self.kind == "ref":
            return f"reference to a `{self.ref}`"
        if self.kind == "list":
            assert self.item is not None
            return f"list of {self.item.doc_type()}"
        return {"int": "count (whole)", "count": "count", "fraction": "fraction", "string": "string",
                "bool": "`true` \\| `false`"}[self.kind]


def _plural(t: FieldType) -> str:
    if t.kind == "ref":
        return f"{t.ref} names"
    return t.describe()


def quantity(dim: Dim) -> FieldType:
    return FieldType("quantity", dim=dim)


def enum(*values: str) -> FieldType:
    return FieldType("enum", values=tuple(values))


def ref(kind: str) -> FieldType:
    return FieldType("ref", ref=kind)


def list_of(item: FieldType) -> FieldType:
    return FieldType("list", item=item)


INT = FieldType("int")
COUNT = FieldType("count")
FRACTION = FieldType("fraction")
STRING = FieldType("string")
BOOL = FieldType("bool")
TIME = quantity(U.TIME)
INFORMATION = quantity(U.INFORMATION)
BANDWIDTH = quantity(U.BANDWIDTH)
FLOP_RATE = quantity(U.FLOP_RATE)
POWER = quantity(U.POWER)
MONEY = quantity(U.MONEY)
MONEY_RATE = quantity(U.MONEY_RATE)
ENERGY_PRICE = quantity(U.ENERGY_PRICE)
RATE = quantity(U.RATE)  # a count per time: interruptions per GPU-hour

DTYPE = enum(*S.DTYPE_BYTES.keys())
#: The collectives a measured curve can come from: the catalogue's kinds (``ccost.collectives``, numpy-free).
CURVE_COLLECTIVES = KINDS
COMPARE_BY = ("latency", "throughput", "overhead", "efficiency", "cost_per_token", "throughput_per_gpu")
#: What picks a serving plan's sweep optimum (a phase's ``ranked_by_objective``).
SWEEP_OBJECTIVES = ("cost_per_token", "throughput_per_gpu", "latency", "ttft", "tpot")

# Sizes are bounded so that a typo (tp = 1e30) is a clear error, not a numpy overflow later (principle: specs
# are untrusted input).
MAX_DEGREE = 1 << 20
MAX_FILE_BYTES = 4 * 1024 * 1024  # a spec is a few KB; 4 MiB is a generated or wrong file (E002)
#: Imports nested deeper than this are a generated or circular mistake, not a project (the checker's E113).
MAX_IMPORT_DEPTH = 100
#: All the files one spec reads, itself and its imports together: a project's specs are a few hundred KB
#: (the std library is ~60 KB); 100 imports of 4 MiB each made a 420 MB HTML review. E113.
MAX_TOTAL_BYTES = 8 * 1024 * 1024
#: Characters of a block's title or a string field: a title is a line, a `source` a reference. A 20,000-character
#: title took two minutes to lay out in the review's PDF; E203 beyond this.
MAX_TEXT_CHARS = 1_000
#: Items of one written list (`tp = [1, 2, 4]`): more is a generated file, refused by the parser before
#: it builds the list (E402); `range(...)` and `pow2(...)` write long ones, within the sweep's bound.
MAX_LIST_ITEMS = 10_000

# Physically plausible ranges of the numeric fields, in SI units, in one place. Every finite
# value inside them gives finite results in every command (the property test in tests/test_finite.py draws
# plans from these ranges); a value outside is an E203 that names the field and shows its range. They are
# wide: from the slowest network or the smallest toy model anyone would price to well past any machine
# that exists, so a real spec never meets them, while 1e-320 GB/s or a 1e308 us latency is refused.
R_LATENCY = {"minimum": 0.0, "maximum": 1.0}  # per hop: 0 to 1 s (WAN round trips are ~100 ms)
R_LINK_BANDWIDTH = {"minimum": 1e6, "maximum": 1e15}  # 1 MB/s (10 Mbit Ethernet) to 1 PB/s
R_LINK_EFFICIENCY = {"minimum": 0.01, "maximum": 1.0}  # 1 % to 100 % of the link's bandwidth
R_GPU_MEMORY = {"minimum": 1e6, "maximum": 1e14}  # 1 MB to 100 TB
R_HBM_BANDWIDTH = {"minimum": 1e9, "maximum": 1e15}  # 1 GB/s to 1 PB/s
R_FLOP_RATE = {"minimum": 1e9, "maximum": 1e18}  # 1 GFLOP/s to 1 EFLOP/s
R_PARAMS = {"minimum": 1.0, "maximum": 1e15}  # 1 to a quadrillion parameters
R_WEIGHT_BYTES = {"minimum": 1.0, "maximum": 1e16}  # 1 B to 10 PB
R_TOKENS = {"minimum": 1, "maximum": 1e9}  # batch, seq
R_MICROBATCHES = {"minimum": 1, "maximum": 1e6}
R_STEP_TIME = {"minimum": 1e-9, "maximum": 3600.0}  # a measured step: 1 ns to one hour
R_OVERHEAD = {"minimum": 0.0, "maximum": 1000.0}  # a threshold on T_comm/T_compute: 0 to 100,000 %
R_GPUS = {"minimum": 1, "maximum": 1e12}
# Money and power. Prices in USD/s inside: 1e-6 USD/h to 10,000 USD/h per GPU or node (a GPU-hour
# lists at a few USD, a whole NVL72 rack at under 1,000 USD/h), so a price written per second by mistake
# (3.50 USD/s = 12,600 USD/h) is an E203, not a plan priced 3,600 times too high.
R_PRICE = {"minimum": 1e-6 / 3600, "maximum": 1e4 / 3600}
R_POWER = {"minimum": 0.0, "maximum": 1e7}  # 0 W to 10 MW: power added to another (a host share)
# What a GPU or a whole node draws: energy per token and tokens per joule divide by it (`power = 0 W`
# was a ZeroDivisionError), so at least 1 W, below any accelerator that exists.
R_POWER_DRAW = {"minimum": 1.0, "maximum": 1e7}
R_PUE = {"minimum": 1.0, "maximum": 10.0}  # power usage effectiveness: facility power / IT power
R_ENERGY_PRICE = {"minimum": 0.0, "maximum": 100 / 3.6e6}  # 0 to 100 USD/kWh, in USD/J
R_COST = {"minimum": 0.0, "maximum": 1e12}  # USD
R_SLO = {"minimum": 0.0, "min_open": True, "maximum": 3600.0}  # a latency promise: above 0, at most an hour
# Training targets and goodput (ccost.model.target).
R_TRAIN_TOKENS = {"minimum": 1.0, "maximum": 1e18}  # tokens to train on
R_TRAIN_STEPS = {"minimum": 1, "maximum": 1e12}
R_GLOBAL_BATCH_TOKENS = {"minimum": 1, "maximum": 1e12}
R_DEADLINE = {"minimum": 1.0, "maximum": 100 * 365 * 86400.0}  # 1 s to a century
R_CHECKPOINT_INTERVAL = {"minimum": 1.0, "maximum": 365 * 86400.0}
R_RESTART = {"minimum": 0.0, "maximum": 30 * 86400.0}  # 0 to a month
# interruptions per GPU and second: from one per GPU in ~30 million years to one per GPU-hour (a broken
# fleet); the job's MTBF stays above a second at a million GPUs
R_FAILURE_RATE = {"minimum": 1e-15, "maximum": 1 / 3600}


# --------------------------------------------------------------------------------------------------
# Fields and kinds


@dataclass(frozen=True)
class Same:
    """A default that is the value of another field of the same block: ``one_shot_latency`` → ``alpha``."""

    field: str


NO_DEFAULT: Any = None


@dataclass(frozen=True)
class Field:
    """One field of a block kind. ``example`` is a right-hand side that checks (used in messages and docs).

    ``required_if`` makes a field conditionally required: it gets the dict of the block's checked values
    (written or defaulted) and says whether the field must be present; ``required_doc`` explains the rule
    in the docs and the message; ``missing_code`` is the diagnostic code when it is absent.
    Ranges: ``minimum``/``maximum``, exclusive when ``min_open``/``max_open``.

    ``default`` is filled in by ``register`` from the kind's entity (the attribute's default in
    ``ccost.spec``): write it there, once. Only ``Same(...)`` (the value of another field) is written here.
    ``phases`` (plan fields): the phases that read the field; None, every phase. A plan of another phase
    that writes it gets W305 (a training field) or W306 (a serving field) from ``ccost.check.plan``.
    ``recorded``: no formula reads the field; it records a fact for the reader (a model's shape from its
    config.json). Every other field is read somewhere past the checker (``tests/test_schema.py`` scans the
    sources), so a field that is declared and then forgotten fails the suite.
    """

    name: str
    type: FieldType
    doc: str
    example: str
    required: bool = False
    default: Any = NO_DEFAULT
    default_doc: str | None = None
    required_if: Callable[[Mapping[str, Any]], bool] | None = None
    required_doc: str | None = None
    missing_code: str = "E104"
    minimum: float | None = None
    min_open: bool = False
    maximum: float | None = None
    max_open: bool = False
    phases: tuple[str, ...] | None = None
    recorded: bool = False

    def default_text(self) -> str:
        """The default as the docs show it."""
        if self.default_doc:
            return self.default_doc
        d = self.default
        if isinstance(d, Same):
            return f"`{d.field}`"
        if d is None:
            return ""
        if isinstance(d, bool):
            return f"`{str(d).lower()}`"
        if self.type.kind == "fraction":
            return f"{U.format_percent(d)}"
        if self.type.kind == "quantity":
            return U.format_quantity(d, self.type.dim)
        return f"`{d}`"

    def range_text(self) -> str | None:
        """'at least 1', 'greater than 0', 'between 0 and 1' ... or None."""
        lo, hi = self.minimum, self.maximum
        fmt = self.format_value
        if lo is not None and hi is not None:
            left = "(" if self.min_open else "["
            right = ")" if self.max_open else "]"
            return f"in {left}{fmt(lo)}, {fmt(hi)}{right}"
        if lo is not None:
            return f"greater than {fmt(lo)}" if self.min_open else f"at least {fmt(lo)}"
        if hi is not None:
            return f"less than {fmt(hi)}" if self.max_open else f"at most {fmt(hi)}"
        return None

    @property
    def unit(self) -> str:
        """The unit the field is documented in: its example's (``2.99 USD/h`` → ``USD/h``); "" for a plain
        number."""
        return self.example.split(" ", 1)[1].strip() if " " in self.example.strip() else ""

    @property
    def per_time(self) -> str:
        """For a rate, the time unit its name and documentation give it (``price_per_gpu_hour``, example
        ``2.99 USD/h`` → ``h``; ``bandwidth``, ``450 GB/s`` → ``s``): what a hint appends to an amount
        written without one. ``s`` when the documented unit names none."""
        unit = self.unit
        if "/" in unit:
            per = unit.rsplit("/", 1)[1].strip()
            try:
                if U.parse_unit(per)[1] == U.TIME:
                    return per
            except U.UnitError:
                pass
        return "s"

    def format_value(self, v: float) -> str:
        if self.type.kind == "quantity":
            return U.format_quantity(v, self.type.dim)
        if self.type.kind == "fraction":
            return U.format_percent(v)
        if self.type.kind in ("int", "count") and float(v).is_integer() and abs(v) < 1e15:
            return f"{int(v):,}"
        return U.format_quantity(v, U.DIMENSIONLESS)


@dataclass(frozen=True)
class BuildContext:
    """What a builder gets: the block's identity and its checked values.

    ``values`` holds every field that is written (here or in an ``extends`` parent) or has a literal default:
    SI floats, ints, strings, bools; references are already the referenced entities, lists are tuples.
    ``varied`` (kinds with ``varies``) holds ``(field, (v1, v2, ...))`` in written order.
    """

    name: str
    title: str | None
    span: Any
    spans: Mapping[str, Any]
    values: Mapping[str, Any]
    varied: tuple[tuple[str, tuple], ...] = ()


@dataclass(frozen=True)
class BlockKind:
    """A block kind: its fields (in documented order) and its entity.

    ``entity`` is the ``ccost.spec`` dataclass a block becomes: every field is one of its attributes, and the
    attribute's default is the field's (``register`` fills it in). ``build`` makes it from the checked values
    (default: ``entity(name, title, span, spans, **values)``). ``spec_attr`` is the attribute of
    ``ccost.spec.Spec`` that collects the entities (``policy`` is a single entity). ``varies`` names a kind
    whose fields this kind also takes, as lists (``sweep`` varies ``plan``).
    """

    name: str
    doc: str
    fields: tuple[Field, ...]
    spec_attr: str
    entity: type
    example: str
    named: bool = True
    varies: str | None = None
    varies_doc: str | None = None  # the docs' row for the varied fields, when not "any field of `varies`"
    build: Callable[[BuildContext], Any] = None  # type: ignore[assignment]  # None: _entity(entity)

    def __post_init__(self) -> None:
        if self.build is None:
            object.__setattr__(self, "build", _entity(self.entity))

    def field(self, name: str) -> Field | None:
        for f in self.fields:
            if f.name == name:
                return f
        return None

    @property
    def field_names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields)


SCHEMA: dict[str, BlockKind] = {}


def register(kind: BlockKind) -> BlockKind:
    """Add a block kind to the language (checker, docs and ``ccost schema`` pick it up), its fields' defaults
    taken from its entity. A kind that ``ccost.spec`` cannot hold is refused here, at import, with what to
    add, rather than by a ``TypeError`` from ``Spec(...)`` on every spec checked."""
    kind = dataclasses.replace(kind, fields=_entity_defaults(kind))
    _check_spec_attr(kind)
    SCHEMA[kind.name] = kind
    return kind


def _entity_defaults(kind: BlockKind) -> tuple[Field, ...]:
    """``kind.fields`` with each default taken from the entity's attribute: one source for a default."""
    cls = kind.entity.__name__
    attrs = {a.name: a for a in dataclasses.fields(kind.entity)}
    out = []
    for f in kind.fields:
        a = attrs.get(f.name)
        if a is None:
            raise TypeError(f"field `{f.name}` of block kind `{kind.name}` is not an attribute of "
                            f"ccost.spec.{cls}: add `{f.name}: TYPE = DEFAULT` to {cls}")
        if f.default is not NO_DEFAULT and not isinstance(f.default, Same):
            raise TypeError(f"field `{f.name}` of block kind `{kind.name}` writes default={f.default!r}: a "
                            f"default is written once, on ccost.spec.{cls}.{f.name}")
        default = a.default if a.default is not dataclasses.MISSING else NO_DEFAULT
        if isinstance(f.default, Same) or f.required:
            if default is not NO_DEFAULT and not f.required:
                raise TypeError(f"ccost.spec.{cls}.{f.name} defaults to {default!r}, but the schema's "
                                f"default is {f.default}: the attribute must default to None")
            out.append(f)
        else:
            out.append(dataclasses.replace(f, default=default))
    return tuple(out)


def _check_spec_attr(kind: BlockKind) -> None:
    """``ccost.spec.Spec`` has the collection ``kind.spec_attr``, of the kind's entity."""
    name = kind.entity.__name__
    want = f"Mapping[str, {name}]" if kind.named else name
    if kind.spec_attr not in {a.name for a in dataclasses.fields(S.Spec)}:
        raise TypeError(f"block kind `{kind.name}` collects its blocks in Spec.{kind.spec_attr}, which "
                        f"ccost.spec.Spec does not have: add `{kind.spec_attr}: {want}"
                        + (" = field(default_factory=dict)`" if kind.named else "`") + " to Spec")
    have = typing.get_type_hints(S.Spec)[kind.spec_attr]
    held = typing.get_args(have)[1] if kind.named and typing.get_args(have) else have
    if not (isinstance(held, type) and issubclass(kind.entity, held)):
        raise TypeError(f"block kind `{kind.name}` collects {name} entities in Spec.{kind.spec_attr}, which "
                        f"holds {have}: give the kind its own collection `{want}`")


def _entity(cls) -> Callable[[BuildContext], Any]:
    """A builder for kinds whose field names are the entity's attribute names."""

    def build(ctx: BuildContext):
        return cls(ctx.name, ctx.title, ctx.span, ctx.spans, **ctx.values)

    return build


def _count(name: str, doc: str, example: str, **kw) -> Field:
    return Field(name, INT, doc, example, minimum=1, maximum=MAX_DEGREE, **kw)


def _degree(a: Axis) -> Field:
    """A plan's parallel degree, from its ``ccost.axes`` record."""
    return _count(a.name, a.doc, a.example, phases=a.phases)


# --- link ---------------------------------------------------------------------------------------------
register(BlockKind(
    "link", "One kind of connection between GPUs: α (latency per hop) and bandwidth (per GPU, per direction).",
    (
        Field("alpha", TIME, "latency per hop (per message step)", "2 us", required=True, **R_LATENCY),
        Field("bandwidth", BANDWIDTH, "per GPU, per direction", "450 GB/s", required=True, **R_LINK_BANDWIDTH),
        Field("one_shot_latency", TIME, "cost of one one-shot AllReduce (direct peer writes)", "8 us",
              default=Same("alpha"), **R_LATENCY),
        Field("efficiency", FRACTION, "achieved share of `bandwidth`", "80 %",
              **R_LINK_EFFICIENCY),
        Field("source", STRING, "where α and β came from; `ccost calibrate` writes `\"measured: ...\"`",
              '"spec sheet"'),
        # A measured curve: what `ccost calibrate` fits, piece by piece, priced as it was fitted.
        Field("curve_from", list_of(INFORMATION),
              "a measured curve: the message size where each piece starts (ascending, the first `0 B`); a "
              "message of m bytes is priced on the last piece that starts at or below m, with that piece's "
              "α and bandwidth instead of `alpha` and `bandwidth`", "[0 B, 3 MiB]",
              minimum=0.0, maximum=float(1 << 60)),
        Field("curve_alpha", list_of(TIME), "the curve's latency per hop, one per piece (absent: `alpha` for "
              "every piece)", "[2.3 us, 8 us]", **R_LATENCY),
        Field("curve_bandwidth", list_of(BANDWIDTH),
              "the curve's bandwidth per GPU per direction, one per piece (× `efficiency`)",
              "[42 GB/s, 231 GB/s]", **R_LINK_BANDWIDTH),
        Field("curve_collective", enum(*CURVE_COLLECTIVES),
              "the collective the curve was measured on: with `curve_ranks`, no algorithm of this collective "
              "on that many ranks is priced below the curve", "allreduce"),
        Field("curve_ranks", INT, "the rank count the curve was measured on (with `curve_collective`)", "8",
              minimum=2, maximum=MAX_DEGREE),
        Field("floor_latency", TIME,
              "no collective of two or more ranks on this link is priced below it (`ccost calibrate` writes "
              "the smallest time the log measured)", "22 us", **R_LATENCY),
    ),
    "links", S.Link,
    'link nvlink4 "NVLink 4 through NVSwitch" {\n  alpha = 2 us\n  bandwidth = 450 GB/s\n}',
))

# --- kernels ------------------------------------------------------------------------------------------
# Fitted kernel constants (ccost.model.kernels): shares of a peak in (0, 1.5] (a weight GEMM can stream a little
# above the vendor's HBM figure, and FP8 kernels are fitted against the FP8 peak), token counts from 0 to a
# billion, fixed times from 0 to 1 s.
R_KERNEL_SHARE = {"minimum": 0.001, "maximum": 1.5}
R_KERNEL_TOKENS = {"minimum": 0.0, "maximum": 1e9}
R_KERNEL_TIME = {"minimum": 0.0, "maximum": 1.0}

register(BlockKind(
    "kernels", "Operator rates measured on one GPU under one engine, reduced to curves by `ccost calibrate "
    "--kernels` from a table of measured kernel times (the forms: docs/kernels.md). A `gpu` lists its blocks "
    "in `kernels`; a plan whose stack has `rates = kernels` prices its weight GEMMs and attention on them "
    "(decode, prefill). A curve not written (its fields absent) leaves that operator to the stack's "
    "efficiencies. The bundled `std/kernels.ccost` holds the curves of H100, H200, B200 and A100 under vLLM.",
    (
        Field("engine", STRING, "the engine and version the kernels ran under", '"vllm 0.24.0"'),
        Field("source", STRING, "provenance: the package and version the table came from, the system, the "
              "tables, the date of the data", '"aiconfigurator-core 0.12.0: h100_sxm gemm_perf"'),
        Field("flops", FLOP_RATE, "the peak the BF16 shares below are of (the reduction writes the GPU's "
              "`flops` it used; absent: the plan's GPU's)", "989.4 TFLOP/s", **R_FLOP_RATE),
        Field("fp8_flops", FLOP_RATE, "the peak the FP8 GEMM shares are of (absent: the GPU's `fp8_flops`)",
              "1978.9 TFLOP/s", **R_FLOP_RATE),
        Field("hbm_bandwidth", BANDWIDTH, "the bandwidth the HBM shares are of (absent: the GPU's)", "3.35 TB/s",
              **R_HBM_BANDWIDTH),
        Field("gemm_efficiency", FRACTION, "weight GEMMs (BF16, FP16): η, the share of the GPU's `flops` a "
              "large GEMM reaches", "84 %", **R_KERNEL_SHARE),
        Field("gemm_half_tokens", COUNT, "weight GEMMs: M½, the token rows at which half of η is reached; "
              "the rate at M rows is flops·η·M/(M + M½)", "116", **R_KERNEL_TOKENS),
        Field("gemm_half_n", COUNT, "weight GEMMs: N½, the weight's output width (elements, on one GPU) at "
              "which half of η is reached; the rate is further multiplied by N/(N + N½); absent: 0, no effect",
              "42", **R_KERNEL_TOKENS),
        Field("gemm_half_k", COUNT, "weight GEMMs: K½, the weight's input width (elements, on one GPU) at "
              "which half of η is reached; the rate is further multiplied by K/(K + K½); absent: 0, no effect",
              "41", **R_KERNEL_TOKENS),
        Field("gemm_hbm_efficiency", FRACTION, "weight GEMMs: e_w, the share of `hbm_bandwidth` a GEMM "
              "streaming its weights reaches (small M: memory-bound)", "86 %", **R_KERNEL_SHARE),
        Field("gemm_latency", TIME, "weight GEMMs: t₀, the fixed time of one GEMM kernel", "4 us",
              **R_KERNEL_TIME),
        Field("fp8_gemm_efficiency", FRACTION, "FP8 weight GEMMs: η, of the GPU's `fp8_flops`", "46 %",
              **R_KERNEL_SHARE),
        Field("fp8_gemm_half_tokens", COUNT, "FP8 weight GEMMs: M½", "110", **R_KERNEL_TOKENS),
        Field("fp8_gemm_half_n", COUNT, "FP8 weight GEMMs: N½", "1579", **R_KERNEL_TOKENS),
        Field("fp8_gemm_half_k", COUNT, "FP8 weight GEMMs: K½", "163", **R_KERNEL_TOKENS),
        Field("fp8_gemm_hbm_efficiency", FRACTION, "FP8 weight GEMMs: e_w", "85 %", **R_KERNEL_SHARE),
        Field("fp8_gemm_latency", TIME, "FP8 weight GEMMs: t₀", "8 us", **R_KERNEL_TIME),
        Field("decode_attention_hbm_efficiency", FRACTION, "decode attention: e_kv, the share of "
              "`hbm_bandwidth` in the KV-cache read", "87 %", **R_KERNEL_SHARE),
        Field("decode_attention_latency", TIME, "decode attention: t₀, the fixed time of one kernel (one per "
              "layer)", "12 us", **R_KERNEL_TIME),
        Field("decode_attention_head_time", TIME, "decode attention: c, the time per sequence and query head "
              "of one kernel", "2.4 ns", **R_KERNEL_TIME),
        Field("decode_attention_half_streams", COUNT, "decode attention: P½, the (sequence × KV head) streams "
              "read in parallel at which half of e_kv's bandwidth is reached (a step of few sequences and KV "
              "heads streams its cache slowly however long the context); absent: 0, every step at e_kv",
              "78", **R_KERNEL_TOKENS),
        Field("fp8_decode_attention_hbm_efficiency", FRACTION, "decode attention over an FP8 KV cache (a model "
              "with `kv_cache = fp8`): e_kv, of `hbm_bandwidth` (absent: the BF16 curve prices it)", "56 %",
              **R_KERNEL_SHARE),
        Field("fp8_decode_attention_latency", TIME, "decode attention over an FP8 KV cache: t₀", "14 us",
              **R_KERNEL_TIME),
        Field("fp8_decode_attention_head_time", TIME, "decode attention over an FP8 KV cache: c", "2 ns",
              **R_KERNEL_TIME),
        Field("fp8_decode_attention_half_streams", COUNT, "decode attention over an FP8 KV cache: P½", "78",
              **R_KERNEL_TOKENS),
        Field("prefill_attention_efficiency", FRACTION, "prefill attention: η_a, the share of the GPU's "
              "`flops` a long causal prompt reaches", "67 %", **R_KERNEL_SHARE),
        Field("prefill_attention_half_tokens", COUNT, "prefill attention: S½, the prompt tokens at which half "
              "of η_a is reached", "1243", **R_KERNEL_TOKENS),
        Field("prefill_attention_latency", TIME, "prefill attention: t₀, the fixed time of one kernel (one per "
              "layer)", "14 us", **R_KERNEL_TIME),
    ),
    "kernels", S.Kernels,
    'kernels h100_vllm "H100 SXM under vLLM 0.24.0" {\n  engine = "vllm 0.24.0"\n  gemm_efficiency = 84 %\n'
    '  gemm_half_tokens = 116\n  gemm_hbm_efficiency = 86 %\n  gemm_latency = 4 us\n}',
))
# --- gpu ----------------------------------------------------------------------------------------------
register(BlockKind(
    "gpu", "One GPU model: memory, memory bandwidth and compute rate.",
    (
        Field("memory", INFORMATION, "HBM capacity", "80 GB", required=True, **R_GPU_MEMORY),
        Field("hbm_bandwidth", BANDWIDTH, "memory bandwidth; decode time is bound by it", "3.35 TB/s",
              required=True, **R_HBM_BANDWIDTH),
        Field("flops", FLOP_RATE, "dense peak for the compute dtype", "989 TFLOP/s", required=True,
              **R_FLOP_RATE),
        Field("achieved_flops", FLOP_RATE,
              "what kernels reach; prefill and training use it; if absent, `flops` is used and the "
              "checklist warns", "600 TFLOP/s", **R_FLOP_RATE),
        Field("source", STRING, "where the numbers came from", '"NVIDIA H100 datasheet"'),
        Field("price_per_hour", MONEY_RATE, "price of one GPU-hour (a cloud list price, or your amortized "
              "cost); a cluster's `price_per_gpu_hour` or `price_per_node_hour` overrides it; without a price "
              "the plan's cost is \"not priced\"", "3.78 USD/h", **R_PRICE),
        Field("power", POWER, "power one GPU draws under load (its TDP); a cluster's `node_power` overrides "
              "it", "700 W", **R_POWER_DRAW),
        Field("fp8_flops", FLOP_RATE, "dense peak for FP8 tensor math: with the per-operator roofline, the "
              "weight GEMMs of a model with `weights = fp8` use it (attention stays at `flops`)",
              "1979 TFLOP/s", **R_FLOP_RATE),
        Field("kernels", list_of(ref("kernels")), "measured kernel curves of this GPU, one `kernels` block per "
              "engine: a plan whose stack has `rates = kernels` uses the block of its stack's engine, else the "
              "first", "[h100_vllm]"),
    ),
    "gpus", S.Gpu,
    'gpu h100 "H100 SXM 80GB" {\n  memory = 80 GB\n  hbm_bandwidth = 3.35 TB/s\n'
    '  flops = 989 TFLOP/s\n  achieved_flops = 600 TFLOP/s\n}',
))

# --- cluster ------------------------------------------------------------------------------------------
register(BlockKind(
    "cluster", "Nodes of GPUs, the scale-up link inside a node and the scale-out link between nodes.",
    (
        Field("gpu", ref("gpu"), "the GPU in every node", "h100", required=True),
        _count("nodes", "number of nodes", "2"),
        _count("gpus_per_node", "GPUs in one node", "8"),
        Field("intra_node", ref("link"), "the scale-up link (NVLink, PCIe, Infinity Fabric)", "nvlink4",
              required=True),
        Field("inter_node", ref("link"), "per-GPU scale-out link (InfiniBand, RoCE, EFA)", "ib_ndr",
              required_if=lambda v: v.get("nodes", 1) > 1, required_doc="required when `nodes` > 1",
              missing_code="E302"),
        _count("nvlink_domain", "GPUs that share the fast link (72 for an NVL72 rack)", "72",
               default=Same("gpus_per_node")),
        Field("price_per_gpu_hour", MONEY_RATE, "price of one GPU-hour in this cluster; overrides the GPU's "
              "`price_per_hour`", "2.99 USD/h", **R_PRICE),
        Field("price_per_node_hour", MONEY_RATE, "price of one node-hour; a GPU-hour costs it / "
              "`gpus_per_node`; overrides the GPU's `price_per_hour` (give this or `price_per_gpu_hour`, not "
              "both)", "23.92 USD/h", **R_PRICE),
        Field("host_power", POWER, "power of one node besides its GPUs (CPUs, NICs, fans, storage); each GPU "
              "carries 1/`gpus_per_node` of it", "2 kW", **R_POWER),
        Field("node_power", POWER, "power of one whole node under load; overrides `gpus_per_node` × the GPU's "
              "`power` + `host_power`", "10.2 kW", **R_POWER_DRAW),
        Field("pue", COUNT, "power usage effectiveness of the facility: facility power / IT power", "1.3",
              **R_PUE),
        Field("electricity_price", ENERGY_PRICE, "price of energy, for hardware you own (a cloud price "
              "includes power): adds facility power × this to the cost per hour", "0.12 USD/kWh",
              **R_ENERGY_PRICE),
        Field("failure_rate", RATE, "training targets: job interruptions per GPU and hour (a job of N GPUs "
              "is interrupted every 1/(N·rate) on average); the goodput of a plan with `train_tokens` reads it",
              "419 / (16384 * 54 * 24 h)", default_doc="419 / (16,384 × 54 × 24 h) = 1.97e-5 per GPU-hour: the "
              "Llama 3 paper's unexpected interruptions (Dubey et al. 2024, §3.3.4)", **R_FAILURE_RATE),
        Field("restart_time", TIME, "training targets: from an interruption to training again (detect it, "
              "replace the node, relaunch, load the checkpoint)", "15 min",
              default_doc="10 min (an assumption: docs/training-target.md)", **R_RESTART),
        Field("checkpoint_bandwidth", BANDWIDTH, "training targets: write bandwidth of the storage checkpoints "
              "go to, the whole cluster's; without it a plan's goodput is not modelled (W309)", "2 TB/s",
              **R_LINK_BANDWIDTH),
    ),
    "clusters", S.Cluster,
    "cluster hgx { gpu = h100; nodes = 1; gpus_per_node = 8; intra_node = nvlink4 }",
))

# --- model --------------------------------------------------------------------------------------------
register(BlockKind(
    "model", "A transformer: shape, parameter count, dtypes, and for mixture-of-experts the experts.",
    (
        _count("layers", "number of transformer layers L", "80", required=True),
        _count("hidden", "hidden size d", "8192", required=True),
        _count("heads", "attention heads", "64"),
        _count("kv_heads", "key/value heads; TP should divide them (checklist item 7)", "8"),
        _count("ffn", "feed-forward inner size", "28672"),
        _count("vocab", "vocabulary size", "128256"),
        Field("params", COUNT, "total parameters", "70.6e9", **R_PARAMS,
              required_if=lambda v: "weight_bytes" not in v,
              required_doc="required unless `weight_bytes` is given"),
        Field("weight_bytes", INFORMATION, "overrides params × weight dtype size", "141 GB",
              **R_WEIGHT_BYTES),
        _count("experts", "MoE: experts per MoE layer", "8"),
        _count("top_k", "MoE: experts each token is routed to", "2"),
        # Same("layers") serves `NAME.moe_layers`; the entity keeps None ("layers when experts is set").
        _count("moe_layers", "MoE: layers with experts; defaults to `layers` when `experts` is set", "58",
               default=Same("layers"), default_doc="`layers` (when `experts` is set)"),
        Field("active_params", COUNT, "MoE: parameters active per token", "37e9", **R_PARAMS),
        Field("weights", DTYPE, "dtype of the weights", "fp8"),
        Field("activations", DTYPE, "dtype of activations (and so of TP/PP/EP messages)", "bf16"),
        Field("kv_cache", DTYPE, "dtype of the KV cache", "fp8"),
        Field("grads", DTYPE, "dtype of gradients (training)", "bf16"),
        Field("source", STRING, "where the numbers came from", '"config.json on Hugging Face"'),
        # Read from a Hugging Face config.json (`config`, `ccost import hf`). The ones marked `recorded`
        # are read by no formula: they record the shape for reviews and later models.
        Field("config", STRING, "a Hugging Face `config.json` to take the shape and parameter count from, "
              "relative to this file and inside its project; fields written in the block override it "
              "(`ccost import hf` prints what it gives)", '"hf/Llama-3.1-8B/config.json"'),
        _count("head_dim", "size of one attention head, when it is not `hidden` / `heads`", "128"),
        Field("qkv_bias", BOOL, "the q, k and v projections have biases (Qwen2); counted in `params`",
              "true", recorded=True),
        Field("tied_embeddings", BOOL, "the LM head shares the input embedding matrix (counted once in "
              "`params`)", "true"),
        _count("expert_ffn", "MoE: inner size of one expert's FFN, when it differs from `ffn` "
               "(DeepSeek's `moe_intermediate_size`)", "2048", recorded=True),
        Field("shared_experts", INT, "MoE: experts every token passes through besides its `top_k` routed ones",
              "1", minimum=0, maximum=MAX_DEGREE, recorded=True),
        Field("dense_layers", INT, "MoE: layers with a dense FFN instead of experts (DeepSeek's "
              "`first_k_dense_replace`)", "3", minimum=0, maximum=MAX_DEGREE, recorded=True),
        _count("q_lora_rank", "MLA: rank of the compressed query", "1536", recorded=True),
        _count("kv_lora_rank", "MLA: rank of the key/value latent the KV cache holds per token", "512"),
        _count("qk_nope_head_dim", "MLA: per-head query/key size without RoPE", "128", recorded=True),
        _count("qk_rope_head_dim", "MLA: per-head RoPE size (its key part is cached beside the latent)", "64"),
        _count("v_head_dim", "MLA: per-head value size", "128", recorded=True),
        Field("mtp_layers", INT, "multi-token-prediction modules in the checkpoint, not counted in `params` "
              "(DeepSeek-V3's `num_nextn_predict_layers`)", "1", minimum=0, maximum=MAX_DEGREE, recorded=True),
        _count("route_nodes", "MoE: nodes one token's routed experts may span (node-limited routing; "
               "DeepSeek-V3: 4); the expert All-to-All sends a token to a node once", "4"),
    ),
    "models", S.Model,
    'model llama3_70b "Llama-3-70B" {\n  layers = 80; hidden = 8192; heads = 64; kv_heads = 8\n'
    '  params = 70.6e9\n}',
))

# --- stack --------------------------------------------------------------------------------------------
R_STACK_OVERHEAD = {"minimum": 0.0, "maximum": 10.0}  # per step or per layer: 0 to 10 s
R_STACK_EFFICIENCY = {"minimum": 0.01, "maximum": 1.0}  # 1 % to 100 % of a peak rate
R_COLLECTIVE_FLOOR = {"minimum": 0.0, "maximum": 1.0}

register(BlockKind(
    "stack", "A software-stack profile: what a serving or training stack (vLLM, TensorRT-LLM, Megatron, ...) "
    "achieves on the hardware: fixed time per step and per layer, achieved shares of HBM bandwidth and peak "
    "FLOP/s, and the small-message floor of its collectives. A plan names one with `stack = NAME`; a plan "
    "that names none gets the bundled default for its phase from `std/stacks.ccost` (`serving_default` for "
    "decode and prefill, `training_default` for train). `std/stacks.ccost` also ships `ideal` (peak rates, "
    "no overhead, no floor), under which the reference notes' worked examples reproduce exactly.",
    (
        Field("step_overhead", TIME, "fixed time per step: scheduling, sampling, host work", "5 ms",
              **R_STACK_OVERHEAD),
        Field("layer_overhead", TIME, "time per layer per step: kernel launches (smaller with CUDA graphs)",
              "20 us", **R_STACK_OVERHEAD),
        Field("seq_overhead", TIME, "decode and prefill: host time per running sequence per step (scheduling, "
              "sampling, detokenising and output processing that grow with the batch); a step of B sequences "
              "adds B times it", "250 us", **R_STACK_OVERHEAD),
        Field("hbm_efficiency", FRACTION, "achieved share of the GPU's `hbm_bandwidth`", "85 %",
              **R_STACK_EFFICIENCY),
        Field("gemm_efficiency", FRACTION, "achieved share of the GPU's peak dense `flops` in weight GEMMs "
              "(a GPU's `achieved_flops`, when given, is a measurement and is used instead)", "70 %",
              **R_STACK_EFFICIENCY),
        Field("attention_efficiency", FRACTION, "achieved share of peak FLOP/s in attention", "50 %",
              **R_STACK_EFFICIENCY),
        Field("elementwise_efficiency", FRACTION, "train: achieved share of the GPU's `hbm_bandwidth` in the "
              "elementwise kernels (norms, activation functions, dropout, residuals), which read and write the "
              "stored activations", "83 %", **R_STACK_EFFICIENCY),
        Field("framework_efficiency", FRACTION, "train, with `rates = kernels`: the share of the GPU's measured "
              "kernel rates (its GEMM curve at the micro-batch's token rows, its prefill-attention curve at "
              "the sequence length) the framework's training step reaches: what the kernels lose to the "
              "framework between them (launch gaps, synchronisation, kernels the curves do not cover, a "
              "sustained clock below the one the kernels were timed at)", "70 %", **R_STACK_EFFICIENCY),
        Field("tp_comm_overlap", BOOL, "train: the stack pipelines each tensor-parallel collective with the GEMM "
              "next to it (Megatron-Core's `--tp-comm-overlap`): only TP time beyond the GEMMs' is exposed",
              "true"),
        Field("collective_floor", TIME, "no collective of this stack takes less (kernel launch and "
              "synchronisation of a small message)", "15 us", **R_COLLECTIVE_FLOOR),
        Field("roofline", enum(*S.ROOFLINES), "decode and prefill: `operator` bounds each operator class on "
              "its own and adds them (weight GEMMs at the weights' dtype rate, MoE experts — only those the "
              "step's tokens hit — and attention: KV reads against attention FLOPs at `attention_efficiency`); "
              "`step` is one roofline for the whole step, max(bytes / HBM bandwidth, FLOPs / FLOP/s), as the "
              "reference notes price it (training always uses `step`)", "step"),
        Field("pipeline", enum(*S.PIPELINES), "decode and prefill with pp > 1: `steady` prices the pipeline "
              "in steady state (M micro-batches circulate with no flush: a token crosses the P stages in P "
              "slots, every sequence gets its next token every max(M, P) slots; collectives carry one "
              "micro-batch); `flush` is the training schedule (M + P − 1)·t_mb that the reference notes use "
              "(training always flushes)", "flush"),
        Field("host_overlap", BOOL, "decode, prefill, serve: the engine prepares step n + 1 on the host while "
              "the GPU runs step n (asynchronous scheduling: vLLM's `async_scheduling`, SGLang's overlap "
              "scheduler, TensorRT-LLM's overlap scheduler), so a step takes max(GPU time, host time) instead "
              "of their sum", "true"),
        Field("engine", STRING, "the serving engine or training framework this profile describes; under "
              "`rates = kernels` it picks the GPU's `kernels` block measured under that engine (`vllm`, "
              "`sglang`, `trtllm`; else the GPU's first block)", '"vllm"'),
        Field("attention_engine", STRING, "train, with `rates = kernels`: the attention kernels the framework "
              "runs, when they are not `engine`'s: its attention is priced on the prefill-attention curve of the "
              "GPU's `kernels` block of that engine (`flash-attn 2`: FlashAttention-2, which does not use "
              "Hopper's asynchronous tensor-core instructions; `cudnn`: cuDNN's fused attention), on `engine`'s "
              "block where the GPU has none", '"flash-attn 2"'),
        Field("engine_version", STRING, "the versions of `engine` the profile holds for (a fact for the reader)",
              '"0.14+"', recorded=True),
        Field("source", STRING, "where the numbers came from (a fit script and its rows, a measurement)",
              '"fit: bench/fit_stack.py"'),
        Field("host_power", POWER, "power per GPU of the host work this stack runs (CPU cores for scheduling, "
              "tokenizing, sampling, data loading); the cost model adds it to each GPU's power when the "
              "cluster gives neither `host_power` nor `node_power`", "150 W",
              **R_POWER),
        Field("rates", enum(*S.RATES), "decode and prefill under `roofline = operator`, and train: `profile` "
              "prices the operators at this stack's efficiencies × the GPU's peaks; `kernels` at the GPU's "
              "measured kernel curves (its `kernels` blocks: GEMM rate by token count, attention by batch, "
              "context and prompt; training: × `framework_efficiency`), where it has them, and at the "
              "efficiencies where not", "kernels"),
    ),
    "stacks", S.Stack,
    'stack vllm_h100 "vLLM 0.6 on H100, CUDA graphs" {\n  step_overhead = 5 ms\n  layer_overhead = 20 us\n'
    '  hbm_efficiency = 0.85\n  gemm_efficiency = 0.70\n  attention_efficiency = 0.50\n'
    '  collective_floor = 15 us\n  source = "fit: bench/fit_stack.py"\n}',
))

# --- traffic ------------------------------------------------------------------------------------------
# What a service must carry (ccost.model.online, ccost.model.simulate): arrivals and request lengths. Rates are plain
# numbers of requests per second; token counts as simulate bounds them (1 to 10 million).
# requests/s: from one a day (the simulator's 2,000 requests then span 6 years, its clock still resolving
# microseconds; at 1e-300/s the arrival times overflowed and every latency read 0 s) to a billion
R_RATE = {"minimum": 1e-5, "maximum": 1e9}
R_REQ_TOKENS = {"minimum": 1, "maximum": 10_000_000}
R_SPREAD = {"minimum": 0.0, "min_open": True, "maximum": 100.0}  # a coefficient of variation: 0 to 10,000 %

register(BlockKind(
    "traffic", "What a service must carry: requests arriving at a mean and a peak rate (Poisson, or "
    "burstier or smoother gaps; or clients that start together), their prompt and output lengths (fixed, or a "
    "distribution of that mean), and the share of each prompt found in the prefix cache. An online plan "
    "(`phase = online`) names one with `traffic = NAME` and is simulated at its rates (docs/simulation.md).",
    (
        Field("rate", COUNT, "mean arrival rate, requests per second (Poisson arrivals unless `burstiness` "
              "says otherwise)", "6", **R_RATE),
        Field("peak_rate", COUNT, "the arrival rate at the busiest time, requests per second: capacity is sized "
              "for it", "8", default_doc="`rate`", **R_RATE),
        Field("burstiness", COUNT, "coefficient of variation of the gaps between arrivals: 1 is Poisson, above "
              "1 burstier (gamma-distributed gaps), below 1 smoother", "2", minimum=0.01, maximum=100.0),
        Field("clients", INT, "instead of a rate: this many clients start together and each sends its next "
              "request the moment its last one ends (a closed loop, as a benchmark at a fixed concurrency runs)",
              "64", minimum=1, maximum=1_000_000),
        Field("burst", INT, "instead of a rate: this many requests arrive at once, and no others (the k-th "
              "waits for the prefills ahead of it)", "32", minimum=1, maximum=1_000_000),
        Field("input_tokens", INT, "prompt tokens per request: the count, or the mean of a distribution "
              "(`input_cv`, `input_p90`, `input_range`)", "1024", **R_REQ_TOKENS),
        Field("output_tokens", INT, "output tokens per request: the count, or the mean of a distribution",
              "256", **R_REQ_TOKENS),
        Field("input_cv", FRACTION, "prompt lengths lognormal with this coefficient of variation (sd/mean)",
              "50 %", **R_SPREAD),
        Field("input_p90", COUNT, "prompt lengths lognormal with this 90th percentile (above the mean, at most "
              "2.27× it)", "2048", **R_REQ_TOKENS),
        Field("input_range", FRACTION, "prompt lengths uniform over mean·(1 ± this), whole tokens (vLLM's "
              "`--random-range-ratio`)", "20 %", minimum=0.0, maximum=0.99),
        Field("input_max", INT, "the longest prompt a distribution draws (longer draws are cut to it)", "8192",
              **R_REQ_TOKENS),
        Field("output_cv", FRACTION, "output lengths lognormal with this coefficient of variation", "80 %",
              **R_SPREAD),
        Field("output_p90", COUNT, "output lengths lognormal with this 90th percentile", "512", **R_REQ_TOKENS),
        Field("output_range", FRACTION, "output lengths uniform over mean·(1 ± this)", "20 %", minimum=0.0,
              maximum=0.99),
        Field("output_max", INT, "the longest output a distribution draws", "4096", **R_REQ_TOKENS),
        Field("trace", STRING, "instead of `input_tokens`/`output_tokens`: a file of requests' prompt and output "
              "token counts, relative to the spec and inside its project — a CSV whose header names the two "
              "columns, JSON lines, or vLLM's serving-benchmark result (`input_lens`, `output_lens`); the "
              "simulations draw requests from its rows (at most 1,000,000, 256 MiB)", '"chat-trace.csv"'),
        Field("prefix_hit", FRACTION, "share of each prompt already in the prefix cache (its KV cache is not "
              "computed again; at least one token is)", "30 %", minimum=0.0, maximum=0.99),
        Field("seed", INT, "the seed of every draw (arrivals, lengths): the same seed gives the same numbers",
              "0", minimum=0, maximum=2**32 - 1),
        Field("requests", INT, "requests each simulation measures (after a warm-up share, before a cool-down "
              "share): more narrow the p99", "2000", minimum=100, maximum=1_000_000),
    ),
    "traffics", S.Traffic,
    'traffic chat "Chat at peak hour" {\n  rate = 6; peak_rate = 8\n  input_tokens = 1024; output_tokens = 256\n}',
))

# --- phases -------------------------------------------------------------------------------------------
# The values of a plan's `phase`, one record each: what every layer may know of a phase without its cost
# model (the checker and the schema read it here; ``ccost.model.phases`` pairs each record with the functions
# that price it, and nothing else tests a phase's name). A new phase, or a new serving mode, is one record
# here (with its plan fields below, `phases=(NAME,)`), its module, and one line in ``ccost.model.phases``
# (docs/architecture.md, recipe f).

NUM = "number|null"  # results.NUM: a finite float, or null where it is undefined


@dataclass(frozen=True)
class ResultField:
    """One key of a phase's own part of the results document (``results`` makes each a ``Key``): its name,
    JSON type, unit, meaning, label, and the labels of the contexts whose wording differs
    (``results.Key``'s ``short``, ``review``, ``text``, ...)."""

    name: str
    type: str
    unit: str
    meaning: str
    label: str
    wording: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Starter:
    """What ``ccost init`` writes for the phase: the sequences a step runs, the plan's workload lines
    (``{batch}`` is filled in), whether a pipelined plan gets micro-batches, and a sweep (its header line,
    then the line of values; the base plan goes between them)."""

    batch: int
    workload: tuple[str, ...]
    microbatches: bool = False
    sweep: tuple[str, str] = ('sweep batch_sizes "How does the batch size move step time and throughput?" {',
                              "  batch = [1, 8, 32, 128]")


def _seq_cells(p: Any) -> tuple[str, str]:
    return f"{p.batch:,}", (f"{p.seq:,}" if p.seq else "—")


def _seq_workload(p: Any) -> str:
    return f"batch {p.batch}" + (f", seq {p.seq}" if p.seq else "")


@dataclass(frozen=True)
class PhaseKind:
    """One phase: its name and what it reads, requires, records and costs, as data.

    ``seq_feeds`` names the cost model's inputs the plan's ``seq`` sets: ``ctx``, the context the KV cache
    holds; ``S``, the tokens each sequence brings to a step (a decode step brings one new token, so decode
    feeds only ``ctx``). ``kv_cache``: with ``seq`` a KV cache is held (``reads_kv``: and read every step).
    ``kv_always``: every step holds a KV cache whatever ``seq`` (serve: its requests' contexts); either
    way the model needs its KV heads (E104). ``needs``: the plan fields it cannot be priced without (the
    schema's ``required_if``, E104); ``errors(plan, add)``: the phase's own rules beyond them (what its
    cost model cannot price), reported through ``add(code, message, field, reads, help)`` by
    ``ccost.check.plan.evaluation_errors``. ``rows``: the plan field that counts the sequences a step runs, what the document's layout shows
    as ``batch`` (the micro-batch rules, E401 and W308, read ``batch`` only when it is ``batch``). ``unread``:
    plan fields it does not read (W306, with ``unread_why`` and ``unread_help``). ``own_code``: the warning
    a plan of another phase gets for writing this phase's own fields (W305 training's, W306 serving's), with
    ``own_scope`` for the message. ``trains``: a training step (forward, backward and the optimizer: FSDP,
    ZeRO and the training schedule apply; the stack's serving fields do not), ``c_F`` its FLOPs per parameter
    per token. ``targets``: a plan of it may state a training target (``train_tokens``, ``global_batch``, a
    ``deadline``: ``ccost.model.target`` prices its time to train, goodput and cost, the review's chapter "Time to
    train"); its global batch derives ``batch`` (``rebatched``) and E303 is among its ``errors``. ``per``: what one step of it is, in the checklist's sentences. ``token_kind``: which tokens its
    throughput counts (what the cost per token is per). ``closed_form_tp``: the notes' closed-form tp
    optimum N* applies to a tp sweep of it. ``search_refusal``: why the layout search cannot price it (None:
    it can), with the help for a search's base plan (``search_help``) and for its ``phase`` axis
    (``axis_help``). ``section``: the key of its own part of a plan's document (``section_fields``, under
    ``section_doc``; ``scoped``: a bare key name finds it, ``results.SCOPES``), the keys of it a sweep point
    repeats (``sweep_fields``) and ``ccost diff`` compares (``diff_keys``). ``starter``: what ``ccost init``
    writes. ``cells(plan)``: the review's batch and seq cells; ``workload(plan)``: ``ccost explain``'s.
    ``means``: what one step (or one run) of the phase is, in a sentence (the language server's hover)."""

    name: str
    default_stack: str
    token_kind: str  # output | input | training
    per: str = "step"
    means: str = ""
    trains: bool = False
    targets: bool = False
    c_F: float = 2.0
    c_F_source: str = "one forward pass: a multiply and an add per parameter"
    seq_feeds: tuple[str, ...] = ("S", "ctx")
    kv_cache: bool = False
    reads_kv: bool = False
    kv_always: bool = False
    needs: tuple[str, ...] = ()
    errors: Callable[[Any, Callable[..., None]], None] | None = None
    rows: str = "batch"
    unread: tuple[str, ...] = ()
    unread_why: str = ""
    unread_help: str = ""
    own_code: str | None = None
    own_scope: str = ""
    closed_form_tp: bool = False
    search_refusal: str | None = None
    search_help: str = ""
    axis_help: str = ""
    capacity: bool = False  # a search whose base is of this phase is a capacity search (ccost.capacity)
    # a serving deployment: sweeps and compares rank it by the objective a user names, checklist item 9 shows its
    # efficiency against one GPU without judging it; its latencies by objective (``SWEEP_OBJECTIVES``) → keys
    ranked_by_objective: bool = False
    latency_keys: tuple[tuple[str, str], ...] = ()
    section: str | None = None
    section_doc: str = ""
    scoped: bool = False
    section_fields: tuple[ResultField, ...] = ()
    sweep_fields: tuple[ResultField, ...] = ()
    diff_keys: tuple[str, ...] = ()
    starter: Starter = Starter(32, ())
    cells: Callable[[Any], tuple[str, str]] = _seq_cells
    workload: Callable[[Any], str] = _seq_workload

    @property
    def searchable(self) -> bool:
        return self.search_refusal is None

    @property
    def sweep_keys(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.sweep_fields)


def global_batch_error(p: Any) -> tuple[str, str, str] | None:
    """E303's one wording: (message, field to point at, help) when a plan's global batch is not whole
    sequences per replica, its batch not whole micro-batches of ``microbatch_size``, or either contradicts a
    written ``batch`` or ``microbatches``; else None."""
    if p.global_batch is not None and p.global_batch_tokens is not None:
        return (f"plan `{p.name}` gives both global_batch = {p.global_batch:,} and global_batch_tokens = "
                f"{p.global_batch_tokens:,}", "global_batch_tokens", "give one: sequences or tokens per step")
    g = p.global_sequences
    mbs = p.microbatch_size or 1
    replicas = p.dp * p.ep
    ranks = "dp" if p.ep == 1 else "dp·ep"
    if g is not None:
        if g != int(g):
            return (f"plan `{p.name}`: global_batch_tokens = {p.global_batch_tokens:,} is not a whole number of "
                    f"sequences of seq = {p.seq:,} tokens ({g:,.4g})", "global_batch_tokens",
                    f"use a multiple of {p.seq:,}, such as {p.seq * max(1, round(g)):,}")
        g = int(g)
        what = f"global_batch = {g:,}" + (f" ({p.global_batch_tokens:,} tokens)" if p.global_batch is None else "")
        if not rules.holds_global_batch(g, replicas, mbs):
            holding = [d for d in range(1, min(g, 1 << 20) + 1) if rules.holds_global_batch(g, d * p.ep, mbs)]
            others = p.gpus // p.dp  # the GPUs of one replica's model copy
            room = p.cluster.gpus // others if p.cluster is not None else 0
            fitting = [d for d in holding if d <= room]
            where_ = f" on the {p.cluster.gpus:,} GPUs of `{p.cluster.name}`" if fitting else ""
            fits = (fitting or holding)[:12]
            unit = "sequences" if mbs == 1 else f"sequences in micro-batches of {mbs}"
            help_ = (f"dp values that hold it{'' if p.ep == 1 else f' with ep = {p.ep}'}{where_}: "
                     + ", ".join(map(str, fits)) if fits else
                     f"a global batch that {ranks}·microbatch_size = {replicas * mbs} divides")
            return (f"plan `{p.name}`: {what} {unit} do not split over its {ranks} = {replicas:,} replicas "
                    f"({g / replicas:,.4g} sequences per replica): this layout cannot hold the global batch",
                    "dp", help_)
        if "batch" in p.spans and p.batch * replicas != g:
            return (f"plan `{p.name}` writes batch = {p.batch:,} per replica, but {what} over {ranks} = "
                    f"{replicas:,} replicas is {g // replicas:,} per replica", "batch",
                    "remove `batch`: with a global batch it is derived (global batch / (dp·ep))")
    if p.microbatch_size is not None:
        if p.batch % mbs:
            return (f"plan `{p.name}`: batch = {p.batch:,} per replica does not split into micro-batches of "
                    f"microbatch_size = {mbs:,}", "microbatch_size",
                    f"microbatch_size values that divide {p.batch:,}: {rules.divisors(p.batch, 64)}")
        if "microbatches" in p.spans and p.microbatches * mbs != p.batch:
            return (f"plan `{p.name}` writes microbatches = {p.microbatches:,}, but batch = {p.batch:,} in "
                    f"micro-batches of microbatch_size = {mbs:,} is {p.batch // mbs:,}", "microbatches",
                    "remove `microbatches`: with a microbatch_size it is derived (batch / microbatch_size)")
    return None


def _target_errors(plan: Any, add: Callable[..., None]) -> None:
    """What a plan of a phase that takes a training target cannot price (``PhaseKind.errors``): a global
    batch its layout cannot hold, or a batch its micro-batch size does not split (E303)."""
    err = global_batch_error(plan)
    if err is not None:
        add(code="E303", message=err[0], name=err[1], help=err[2], reads=(
            err[1], "global_batch", "global_batch_tokens", "batch", "dp", "ep", "seq", "microbatch_size",
            "microbatches"))


def _serve_errors(plan: Any, add: Callable[..., None]) -> None:
    """What a serve plan (``ccost.model.serve``) cannot price, beyond its fields' own checks: through ``add``."""
    missing = [f for f in ("concurrency", "input_tokens", "output_tokens") if getattr(plan, f) is None]
    if missing:
        add("E104", f"plan `{plan.name}` is a serve plan and needs " + ", ".join(f"`{f}`" for f in missing),
            "phase", ("phase", *missing), "add e.g. `concurrency = 32; input_tokens = 1024; output_tokens = 256`")
        return
    if plan.output_tokens < 2:
        add("E203", f"plan `{plan.name}`: output_tokens must be at least 2, got {plan.output_tokens} (TPOT is the "
            "gap between output tokens)", "output_tokens", ("output_tokens",), "use output_tokens ≥ 2")
    if plan.chunk_tokens is not None and plan.chunk_tokens < 1:
        add("E203", f"plan `{plan.name}`: chunk_tokens must be at least 1, got {plan.chunk_tokens}", "chunk_tokens",
            ("chunk_tokens",), "use e.g. `chunk_tokens = 512`, or leave it out (the whole prompt in one step)")
    if plan.cp > 1:
        add("E401", f"plan `{plan.name}`: context parallelism is priced for decode and prefill plans, not yet for a "
            "serve plan's mixed steps (its prompt chunk's ring attention)", "cp", ("cp", "phase"),
            "remove `cp`, or price the decode and prefill steps as plans of their own")
    if not rules.microbatches_at_most_batch(plan.microbatches, plan.concurrency):
        add("E401", f"plan `{plan.name}` splits concurrency = {plan.concurrency} running requests into "
            f"microbatches = {plan.microbatches}: a micro-batch needs at least one", "microbatches",
            ("microbatches", "concurrency"), f"use microbatches ≤ {plan.concurrency}, or a higher concurrency")
    if plan.compute_time is not None:
        add("E401", f"plan `{plan.name}`: a serve plan prices two kinds of step (decode and mixed), so one "
            "`compute_time` cannot stand for them", "compute_time", ("compute_time", "phase"),
            "remove `compute_time`")


def _online_errors(plan: Any, add: Callable[..., None]) -> None:
    """What an online plan (``ccost.model.online``) cannot price, beyond its fields' own checks: through ``add``."""
    t = plan.traffic
    if t is None:
        add("E104", f"plan `{plan.name}` is an online plan and needs `traffic`", "phase", ("phase", "traffic"),
            "add `traffic = NAME`, naming a `traffic` block (rate, input_tokens, output_tokens)")
        return
    if plan.stack is not None and plan.stack.roofline != "operator":
        add("E401", f"plan `{plan.name}`: an online plan prices each engine step per operator (weights, attention "
            f"at the step's contexts); stack `{plan.stack.name}` prices one roofline for the whole step",
            "stack", ("stack", "phase"), "use a stack with `roofline = operator` (every bundled serving stack)")
    if plan.cp > 1:
        add("E401", f"plan `{plan.name}`: context parallelism is not priced in an online plan's steps", "cp",
            ("cp", "phase"), "remove `cp`")
    if plan.compute_time is not None:
        add("E401", f"plan `{plan.name}`: an online plan prices every engine step from what it holds, so one "
            "`compute_time` cannot stand for them", "compute_time", ("compute_time", "phase"),
            "remove `compute_time`")
    if plan.step_tokens is not None and plan.max_seqs is not None and plan.step_tokens < plan.max_seqs:
        add("E401", f"plan `{plan.name}`: step_tokens = {plan.step_tokens} is below max_seqs = {plan.max_seqs}: every "
            "running request decodes one token a step, so a step must hold at least max_seqs tokens (vLLM "
            "refuses max_num_batched_tokens below max_num_seqs too)", "step_tokens", ("step_tokens", "max_seqs"),
            f"use step_tokens ≥ {plan.max_seqs}, or fewer max_seqs")
    if plan.prefill_workers and t.clients:
        add("E401", f"plan `{plan.name}`: traffic `{t.name}` is a closed loop of clients, which is simulated on "
            "aggregated engines, not on disaggregated workers", "prefill_workers", ("prefill_workers", "traffic"),
            "give the traffic a `rate`, or remove `prefill_workers`")
    if not (t.rate or t.clients or t.burst) or (t.input_tokens is None and t.trace is None) or (
            t.output_tokens is None and t.trace is None):
        add("E104", f"plan `{plan.name}`: traffic `{t.name}` needs a rate (or clients, or a burst), input_tokens "
            "and output_tokens", "traffic", ("traffic",), "add e.g. `rate = 6; input_tokens = 1024; "
            "output_tokens = 256` to the traffic")


def _online_fields() -> tuple[ResultField, ...]:
    """The ``online`` section's keys: the traffic and the engine, then what the simulation measured at the
    mean rate and at the peak, the SLO verdict and the highest rate one replica carries."""
    out = [
        ResultField("traffic", "string", "text", "the traffic block the plan serves", "traffic"),
        ResultField("arrivals", "string", "text", "`poisson`, `gamma` (burstiness ≠ 1), `clients` or `burst`",
                    "arrivals"),
        ResultField("rate_per_s", NUM, "1/s", "mean arrival rate into the plan (null for clients or a burst)",
                    "rate"),
        ResultField("peak_rate_per_s", NUM, "1/s", "arrival rate at the peak (null for clients or a burst)",
                    "peak rate"),
        ResultField("engines", "integer", "count", "engines the traffic is spread over, round robin: dp·ep "
                    "replicas' engines, or every prefill and decode worker", "engines"),
        ResultField("max_seqs", "integer", "count", "running requests an engine holds at most", "max running"),
        ResultField("step_tokens", "integer", "count", "tokens an engine step computes at most (decode rows and "
                    "prompt chunks)", "step tokens"),
        ResultField("kv_tokens", NUM, "count", "KV-cache tokens one (decode) engine holds beside its weights",
                    "KV tokens"),
        ResultField("mean_input_tokens", NUM, "count", "mean prompt tokens of the traffic", "mean input"),
        ResultField("mean_output_tokens", NUM, "count", "mean output tokens of the traffic", "mean output"),
        ResultField("prefill_workers", "integer", "count", "prefill workers per replica (0: aggregated)",
                    "prefill workers"),
        ResultField("decode_workers", "integer", "count", "decode workers per replica (0: aggregated)",
                    "decode workers"),
        ResultField("prefill_tp", "integer", "count", "the prefill workers' tp (0: aggregated)", "prefill tp"),
        ResultField("kv_transfer_s", NUM, "s", "moving the mean prompt's KV cache to a decode worker (null: "
                    "aggregated)", "KV transfer"),
        ResultField("decode_step_time_s", NUM, "s", "the decode step of the mean number of requests decoding "
                    "(= step_time_s)", "decode step"),
        ResultField("mixed_step_time_s", NUM, "s", "the same step with one prompt chunk", "mixed step"),
        ResultField("requests_simulated", "integer", "count", "requests each simulation measured", "requests "
                    "simulated"),
        ResultField("seed", "integer", "count", "the seed of the simulation's draws", "seed"),
        ResultField("slo_percentile", "string", "text", "the percentile the policy's SLOs hold at", "SLO "
                    "percentile"),
    ]
    what = {"ttft": ("time to first token, queueing included", "TTFT"),
            "tpot": ("time per output token after the first (inter-token latency)", "TPOT"),
            "e2e": ("request latency, arrival to last token", "E2E")}
    for m, (meaning, lab) in what.items():
        out.append(ResultField(f"{m}_mean_s", NUM, "s", f"{meaning}: mean at the mean rate", f"{lab} mean"))
        for q in ("p50", "p90", "p99"):
            out.append(ResultField(f"{m}_{q}_s", NUM, "s", f"{meaning}: {q} at the mean rate", f"{lab} {q}"))
    out += [
        ResultField("goodput_share", NUM, "fraction", "share of requests meeting every SLO limit at the mean rate "
                    "(null without SLOs)", "goodput"),
        ResultField("utilisation", NUM, "fraction", "share of time an engine (a decode worker) runs a step, at the "
                    "mean rate", "utilisation"),
        ResultField("mean_running", NUM, "count", "requests admitted and not finished per engine, time average",
                    "mean running"),
        ResultField("preemptions", "integer", "count", "requests preempted for KV cache, at the mean rate",
                    "preemptions"),
        ResultField("stable", "boolean", "", "the engines keep up at the mean rate (90 % of the requests that "
                    "arrive finish)", "stable"),
        ResultField("requests_per_s", NUM, "1/s", "requests finished per second, simulated, the whole plan",
                    "requests/s"),
        ResultField("output_tokens_per_s", NUM, "tokens/s", "output tokens per second the traffic asks for at "
                    "its mean rate (= throughput_tokens_s)", "output tokens/s"),
        ResultField("output_tokens_per_s_per_gpu", NUM, "tokens/s", "output tokens per second per GPU",
                    "output tokens/s per GPU"),
    ]
    for m, (meaning, lab) in what.items():
        for q in ("p50", "p90", "p99"):
            out.append(ResultField(f"peak_{m}_{q}_s", NUM, "s", f"{meaning}: {q} at the peak rate",
                                   f"{lab} {q} at peak"))
        out.append(ResultField(f"peak_{m}_slo_s", NUM, "s", f"{meaning}: at the SLO's percentile, at the peak "
                               "rate", f"{lab} at peak (SLO percentile)"))
    out += [
        ResultField("peak_goodput_share", NUM, "fraction", "share of requests meeting every SLO limit at the peak "
                    "rate (null without SLOs)", "goodput at peak"),
        ResultField("peak_utilisation", NUM, "fraction", "busy share of an engine at the peak rate",
                    "utilisation at peak"),
        ResultField("peak_stable", "boolean", "", "the engines keep up at the peak rate", "stable at peak"),
        ResultField("meets_slo", "boolean", "", "at the peak rate every SLO limit holds at its percentile, the "
                    "goodput share is met and the engines keep up", "meets the SLOs"),
        ResultField("slo_ratio", NUM, "ratio", "at the peak rate, the worst of each SLO figure over its limit (a "
                    "latency at the SLO percentile over its maximum, the least goodput share over the one "
                    "measured): above 1 an SLO is missed; checklist item 15 (null: the policy states no SLO)",
                    "worst SLO figure / limit"),
        ResultField("highest_rate_per_s", NUM, "1/s", "the highest rate one replica carries within the SLOs "
                    "(simulated; null for clients or a burst)", "highest rate per replica"),
        ResultField("highest_rate_above_per_s", NUM, "1/s", "the lowest rate seen not to meet them (null: none "
                    "found)", "fails at"),
        ResultField("replicas_for_peak", "integer|null", "count", "replicas the peak rate needs at the highest "
                    "rate each: ⌈peak / highest⌉", "replicas for peak"),
        ResultField("method", "string", "text", "how the figures were obtained", "method"),
    ]
    return tuple(out)


_SEQ_LINE = "  seq     = 4096        # {doc}"
_BATCH_LINE = "  batch   = {batch}          # sequences in flight per replica"

PHASE_KINDS: tuple[PhaseKind, ...] = (
    PhaseKind(
        "decode", "serving_default", "output", per="token", seq_feeds=("ctx",), kv_cache=True, reads_kv=True,
        means="each step generates one token for every sequence of the batch",
        closed_form_tp=True,
        starter=Starter(32, (_BATCH_LINE, _SEQ_LINE.format(doc="context length: KV-cache reads and memory")))),
    PhaseKind(
        "prefill", "serving_default", "input", kv_cache=True, needs=("seq",),
        means="one step is the prefill of the batch's prompts",
        starter=Starter(1, (_BATCH_LINE, _SEQ_LINE.format(doc="prompt tokens")))),
    PhaseKind(
        "train", "training_default", "training", trains=True, targets=True, errors=_target_errors, c_F=6.0,
        means="one step is a training step of the global batch: forward, backward, gradient exchange",
        c_F_source="training: 2 forward + 4 backward", needs=("seq",), own_code="W305", own_scope="training",
        section="training", section_doc="training plans: schedule, FLOPs and what is hidden (ccost.model.training)",
        section_fields=(
            ResultField("schedule", "string", "text", "`gpipe`, `one_f_one_b` or `interleaved`", "schedule"),
            ResultField("virtual_stages", "integer", "count", "model chunks per GPU, v (1 unless interleaved)",
                        "virtual stages"),
            ResultField("recompute", "string", "text", "`none`, `selective` or `full`", "recompute"),
            ResultField("sequence_parallel", "boolean", "", "sequence parallelism on (and tp > 1)",
                        "sequence parallel"),
            ResultField("optimizer_sharding", "string", "text", "`none`, `zero1`, `zero2` or `fsdp`",
                        "optimizer sharding"),
            ResultField("model_flops_per_token", NUM, "FLOP", "model FLOPs per token, forward + backward: "
                        "3·(2·N_GEMM + 2·L·S·d causal attention), logits included, recomputation not",
                        "model flops per token"),
            ResultField("model_flops_per_gpu_s", NUM, "FLOP/s", "model FLOPs per step per GPU / step time",
                        "model FLOP/s per GPU"),
            ResultField("mfu", NUM, "fraction", "model FLOP/s per GPU / the GPU's peak FLOP/s", "MFU"),
            ResultField("forward_time_s", NUM, "s", "one micro-batch's forward pass on one GPU", "forward time s"),
            ResultField("backward_time_s", NUM, "s", "one micro-batch's backward pass on one GPU, recomputation "
                        "included", "backward time s"),
            ResultField("exposed_per_microbatch_s", NUM, "s", "communication a micro-batch waits for (TP, EP, "
                        "PP, FSDP gathers not hidden)", "exposed per microbatch s"),
            ResultField("exposed_once_s", NUM, "s", "communication the step waits for once (DP gradients not "
                        "hidden behind the last backward)", "exposed once s"),
            ResultField("microbatches_in_flight", NUM, "count", "micro-batches whose activations the first "
                        "stage holds", "microbatches in flight"),
            ResultField("activation_bytes_per_token_layer", NUM, "B", "activation bytes stored per token and "
                        "layer", "activation bytes per token layer")),
        starter=Starter(8, (_BATCH_LINE, _SEQ_LINE.format(doc="sequence length")), microbatches=True)),
    PhaseKind(
        "serve", "serving_default", "output", seq_feeds=(), kv_always=True,
        means="continuous batching of requests: the request figures (TTFT, TPOT, requests/s) come from the "
              "decode steps and the mixed steps that also prefill a chunk (`ccost.model.serve`)",
        needs=("concurrency", "input_tokens", "output_tokens"), errors=_serve_errors, rows="concurrency",
        unread=("batch", "seq"),
        unread_why="the serve step's batch is `concurrency`, its contexts come from `input_tokens` and "
                   "`output_tokens`",
        unread_help="remove them; set `concurrency`, `input_tokens` and `output_tokens`",
        own_code="W306", own_scope="`phase = serve`",
        search_refusal="a serve plan prices a decode and a mixed step per point",
        search_help="search a decode plan of the same layout, or compare serve plans (or sweep one)",
        axis_help="search decode (and prefill) layouts, then compare or sweep serve plans of the best",
        section="serve", scoped=True,
        section_doc="serve plans: continuous batching, a closed loop of `concurrency` requests (ccost.model.serve); "
                    "the plan's other keys describe its decode step, its memory the peak context I + O, its "
                    "throughput the output tokens/s",
        section_fields=(
            ResultField("concurrency", "integer", "count", "requests running at once per replica (per dp·ep rank "
                        "group)", "concurrency"),
            ResultField("input_tokens", "integer", "count", "prompt tokens per request", "input tokens"),
            ResultField("output_tokens", "integer", "count", "output tokens per request", "output tokens"),
            ResultField("chunk_tokens", "integer", "count", "the most prompt tokens one step prefills", "chunk"),
            ResultField("requests_running", NUM, "count", "requests running in the plan: dp·ep·concurrency",
                        "requests running"),
            ResultField("chunks_per_prompt", NUM, "count", "prefill steps per request, n_c = ⌈I/chunk⌉",
                        "chunks per prompt"),
            ResultField("mean_chunk_tokens", NUM, "count", "prompt tokens per chunk on average, I/n_c",
                        "mean chunk"),
            ResultField("prefill_saturated", "boolean", "", "one chunk per step cannot keep up (C·n_c > n_c + O "
                        "− 1): every step is mixed and requests wait for prefill", "prefill saturated"),
            ResultField("mixed_step_share", NUM, "fraction", "share of steps that carry a prompt chunk",
                        "mixed steps", (("review", "steps with a prompt chunk"),)),
            ResultField("decoding_in_mixed_step", NUM, "count", "requests decoding beside the chunk in a mixed "
                        "step", "decoding in a mixed step"),
            ResultField("decode_step_time_s", NUM, "s", "a step with every request decoding (= step_time_s)",
                        "decode step"),
            ResultField("mixed_step_time_s", NUM, "s", "a step with one prompt chunk beside the decoding "
                        "requests", "mixed step"),
            ResultField("mean_step_time_s", NUM, "s", "the mean step time", "mean step"),
            ResultField("ttft_s", NUM, "s", "time to first token: the request's prefill chunks (and its wait for "
                        "prefill when saturated)", "TTFT"),
            ResultField("tpot_s", NUM, "s", "time per output token after the first (mean inter-token latency, "
                        "ITL)", "TPOT", (("text", "TPOT (inter-token)"), ("review", "TPOT (inter-token)"))),
            ResultField("request_latency_s", NUM, "s", "a request from admission to its last token: TTFT + (O − "
                        "1)·TPOT", "request latency"),
            ResultField("requests_per_s", NUM, "1/s", "requests completed per second, Little's law: requests "
                        "running / request latency", "requests/s"),
            ResultField("output_tokens_per_s", NUM, "tokens/s", "output tokens per second: requests/s × O",
                        "output tokens/s", (("short", "output tok/s"),)),
            ResultField("output_tokens_per_s_per_gpu", NUM, "tokens/s", "output tokens per second per GPU",
                        "output tokens/s per GPU"),
            ResultField("input_tokens_per_s", NUM, "tokens/s", "prompt tokens prefilled per second: requests/s × "
                        "I", "input tokens/s"),
            ResultField("total_tokens_per_s", NUM, "tokens/s", "prompt + output tokens per second",
                        "total tokens/s", (("review", "total tokens/s (in + out)"),)),
            ResultField("total_tokens_per_s_per_gpu", NUM, "tokens/s", "prompt + output tokens per second per "
                        "GPU", "total tokens/s per GPU")),
        sweep_fields=(
            ResultField("ttft_s", NUM, "s", "serve plans: time to first token", "TTFT"),
            ResultField("tpot_s", NUM, "s", "serve plans: time per output token (inter-token latency)", "TPOT"),
            ResultField("requests_per_s", NUM, "1/s", "serve plans: requests completed per second", "requests/s"),
            ResultField("output_tokens_per_s", NUM, "tokens/s", "serve plans: output tokens per second",
                        "output tokens/s")),
        diff_keys=("ttft_s", "tpot_s", "request_latency_s", "requests_per_s", "output_tokens_per_s"),
        ranked_by_objective=True,
        latency_keys=(("latency", "request_latency_s"), ("ttft", "ttft_s"), ("tpot", "tpot_s")),
        starter=Starter(32, (
            "  concurrency   = {batch}     # requests running per replica",
            "  input_tokens  = 1024   # prompt tokens per request",
            "  output_tokens = 256    # output tokens per request",
            "  chunk_tokens  = 512    # chunked prefill: prompt tokens one step prefills"),
            sweep=('sweep concurrency "How does the number of running requests move TPOT and tokens/s?" {',
                   "  concurrency = [1, 8, 32, 128]")),
        cells=lambda p: (f"{p.concurrency:,} requests", f"{p.input_tokens:,} in / {p.output_tokens:,} out"),
        workload=lambda p: (f"concurrency {p.concurrency}, {p.input_tokens} in / {p.output_tokens} out, chunks of "
                            f"{p.chunk_tokens or p.input_tokens}")),
    PhaseKind(
        "online", "serving_default", "output", seq_feeds=(), kv_always=True,
        means="requests arrive at the traffic's rate (an open loop) and the engine's steps are simulated with the "
              "step model, queueing included: TTFT, TPOT and request latency at p50/p90/p99 (`ccost.model.online`)",
        needs=("traffic",), errors=_online_errors, rows="max_seqs",
        unread=("batch", "seq"),
        unread_why="an online plan's steps hold what its traffic brings: requests of the traffic's lengths, up to "
                   "`max_seqs` running",
        unread_help="remove them; the traffic block gives the requests, `max_seqs` and `step_tokens` the engine",
        own_code="W306", own_scope="`phase = online`",
        search_refusal="an online plan is simulated per point", capacity=True,
        search_help="a search whose base is an online plan is a capacity search: vary cluster, tp, pp, ep, dp, "
                    "max_seqs, step_tokens, prefill_workers, decode_workers, prefill_tp",
        axis_help="search decode layouts, or make an online plan the base: a capacity search",
        section="online", scoped=True,
        section_doc="online plans: an open loop at the traffic's rates, the engine simulated step by step "
                    "(ccost.model.online, docs/simulation.md); the plan's other keys describe the decode step of the mean "
                    "number of requests decoding, its throughput the output tokens/s of the traffic",
        section_fields=_online_fields(),
        sweep_fields=(
            ResultField("ttft_p99_s", NUM, "s", "online plans: time to first token, p99 at the mean rate",
                        "TTFT p99"),
            ResultField("tpot_p99_s", NUM, "s", "online plans: time per output token, p99 at the mean rate",
                        "TPOT p99"),
            ResultField("meets_slo", "boolean", "", "online plans: the SLOs hold at the peak rate", "meets SLOs"),
            ResultField("peak_ttft_slo_s", NUM, "s", "online plans: TTFT at the SLO percentile, at the peak rate",
                        "TTFT at peak"),
            ResultField("peak_tpot_slo_s", NUM, "s", "online plans: TPOT at the SLO percentile, at the peak rate",
                        "TPOT at peak"),
            ResultField("peak_e2e_slo_s", NUM, "s", "online plans: request latency at the SLO percentile, at the "
                        "peak rate", "E2E at peak"),
            ResultField("highest_rate_per_s", NUM, "1/s", "online plans: the highest rate one replica carries",
                        "highest rate")),
        diff_keys=("ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s", "e2e_p99_s", "highest_rate_per_s"),
        ranked_by_objective=True,
        latency_keys=(("latency", "peak_e2e_slo_s"), ("ttft", "peak_ttft_slo_s"), ("tpot", "peak_tpot_slo_s")),
        starter=Starter(256, (
            "  traffic  = chat     # the traffic block it serves (below)",
            "  max_seqs = {batch}      # running requests per engine at most",
            "  step_tokens = 8192  # tokens one engine step computes at most (chunked prefill)"),
            # the traffic the plan names is written before the sweep (the record has no other place for a block)
            sweep=('traffic chat "Chat traffic: 6 requests/s, 8 at the peak" {\n  rate = 6; peak_rate = 8\n'
                   '  input_tokens = 1024; output_tokens = 256\n}\n\n'
                   'sweep max_running "How does the running-request cap move the tails?" {',
                   "  max_seqs = [32, 64, 128, 256]")),
        cells=lambda p: (f"up to {p.max_seqs:,} running", f"traffic {p.traffic.name if p.traffic else '—'}"),
        workload=lambda p: (f"traffic {p.traffic.name if p.traffic else '—'}, up to {p.max_seqs} running, "
                            f"{p.step_tokens} tokens a step")),
)
PHASES: Mapping[str, PhaseKind] = MappingProxyType({k.name: k for k in PHASE_KINDS})
#: The phases' names, in the table's order: the values of a plan's `phase`.
PHASE_NAMES: tuple[str, ...] = tuple(PHASES)


def phase_kind(name: str) -> PhaseKind:
    """The record of phase ``name`` (a checked plan's phase is always one)."""
    return PHASES[name]


def targeted(plan: Any) -> bool:
    """A plan of a phase that takes a training target (``PhaseKind.targets``) that states one
    (``train_tokens`` or ``train_steps``): ``ccost.model.target`` prices its time to train."""
    return PHASES[plan.phase].targets and plan.states_target


def rebatched(plan: Any, keep: frozenset[str] | set[str] = frozenset()) -> Any:
    """``plan`` with its batch (and micro-batches) from its global batch (and micro-batch size) when its phase
    takes a training target (``Plan.rebatched``, which keeps the fields in ``keep``); else ``plan``."""
    return plan.rebatched(keep) if PHASES[plan.phase].targets else plan


def _needs(field: str) -> Callable[[Mapping[str, Any]], bool]:
    """The schema's ``required_if`` of a plan field some phases need (their ``needs``)."""
    def required(values: Mapping[str, Any]) -> bool:
        kind = PHASES.get(values.get("phase"))  # type: ignore[arg-type]
        return kind is not None and field in kind.needs
    return required


def _needs_doc(field: str) -> str:
    """'required for `prefill` and `train`': the phases that need ``field``."""
    return "required for " + " and ".join(f"`{k.name}`" for k in PHASE_KINDS if field in k.needs)


# --- plan ---------------------------------------------------------------------------------------------
def _build_plan(ctx: BuildContext) -> S.Plan:
    """A plan; one that states a global batch and writes no `batch` gets batch = global batch / (dp·ep), and
    one with a `microbatch_size` and no `microbatches` gets microbatches = batch / microbatch_size
    (``rebatched``; a layout that cannot hold them keeps its numbers and is E303, ``_target_errors``)."""
    plan = S.Plan(ctx.name, ctx.title, ctx.span, ctx.spans, **ctx.values)
    return rebatched(plan, keep=frozenset(ctx.spans) & {"batch", "microbatches"})


register(BlockKind(
    "plan", "One layout of one model on one cluster for one workload: the unit of evaluation.",
    (
        Field("model", ref("model"), "the model", "llama3_70b", required=True),
        Field("cluster", ref("cluster"), "the cluster", "hgx", required=True),
        Field("phase", enum(*PHASE_NAMES), "the workload: one decode step, a prefill of `seq` tokens, a "
              "training step, `serve`: continuous batching of requests in a closed loop (`concurrency`, "
              "`input_tokens`, `output_tokens`, `chunk_tokens`; ccost.model.serve), or `online`: requests arriving at a "
              "`traffic`'s rate, the engine simulated (ccost.model.online)", "decode", required=True),
        Field("batch", INT, "sequences in flight, per replica (per dp·ep rank)", "32", **R_TOKENS),
        Field("seq", INT, "prompt tokens (prefill), context length (decode: KV-cache reads and memory), "
              "sequence length (train)", "2048", **R_TOKENS,
              required_if=_needs("seq"), required_doc=_needs_doc("seq")),
        *(_degree(a) for a in AXES if not a.optional),
        Field("fsdp", BOOL, "train: shard parameters, AllGather per layer, ReduceScatter gradients",
              "true", phases=("train",)),
        Field("microbatches", INT, "pipeline micro-batches M", "32", **R_MICROBATCHES),
        Field("allreduce", enum(*S.ALLREDUCE_ALGORITHMS),
              "AllReduce algorithm; `auto` takes the cheapest per message and says so", "tree"),
        Field("cross_node", enum(*S.CROSS_NODE),
              "how a collective group that spans nodes is priced: `flat` (one ring that waits on its "
              "slowest link at every step), `hierarchical` (reduce-scatter inside the node, AllReduce "
              "across nodes on 1/g of the data, all-gather inside the node) or `auto` (the cheaper)",
              "hierarchical"),
        Field("one_shot_volume", enum(*S.ONE_SHOT_VOLUMES),
              "bytes a one-shot AllReduce is charged: `egress`, each GPU writes its whole buffer to every "
              "peer, (P−1)·m; or `ring`, the ring volume 2(P−1)/P·m that the reference notes charge "
              "(worked examples A1 and A3)", "ring"),
        Field("overlap", FRACTION, "share of communication hidden behind compute", "40 %",
              minimum=0, maximum=1),
        Field("compute_time", TIME, "overrides the derived compute time (a measured step, say)", "12 ms",
              **R_STEP_TIME),
        Field("load", FRACTION, "share of the month the plan runs at its throughput; the GPUs are paid and "
              "powered all month, so cost per token at this load is the full-load cost / `load`", "60 %",
              minimum=0, min_open=True, maximum=1),
        Field("stack", ref("stack"), "the software-stack profile that prices the plan", "vllm_h100",
              default_doc="`serving_default` (decode, prefill) or `training_default` (train) from "
              "`std/stacks.ccost`"),
        Field("schedule", enum(*S.SCHEDULES), "train: pipeline schedule; `gpipe` keeps all M micro-batches' "
              "activations, `one_f_one_b` at most P, `interleaved` runs `virtual_stages` model chunks per GPU "
              "(bubble (P−1)/(v·M) of the ideal time)", "interleaved", phases=("train",)),
        Field("virtual_stages", INT, "train, `schedule = interleaved`: model chunks per GPU, v", "4",
              minimum=1, maximum=MAX_DEGREE, phases=("train",)),
        Field("recompute", enum(*S.RECOMPUTE), "train: activation recomputation; `selective` re-runs the "
              "attention core in the backward pass (as FlashAttention does), `full` the whole layer",
              "full", phases=("train",)),
        Field("sequence_parallel", BOOL, "train: sequence parallelism; TP's AllReduce becomes ReduceScatter + "
              "AllGather and the activations outside the GEMMs are split over the tp ranks", "true",
              phases=("train",)),
        Field("optimizer_sharding", enum(*S.OPTIMIZER_SHARDING), "train: optimizer state sharded over the "
              "data-parallel ranks: `zero1` (Megatron's distributed optimizer), `zero2` (gradients too); "
              "`fsdp = true` shards the parameters as well", "zero1", phases=("train",)),
        Field("master_weights", DTYPE, "train: dtype of the optimizer's master copy of the weights", "fp32",
              phases=("train",)),
        Field("train_tokens", COUNT, "train: the target, tokens to train on; the review and `ccost explain` "
              "derive the steps, the time to train with interruptions (goodput), GPU-days, energy and cost",
              "15e12", phases=("train",), **R_TRAIN_TOKENS),
        Field("train_steps", INT, "train: the target as optimizer steps (instead of `train_tokens`)", "500_000",
              phases=("train",), **R_TRAIN_STEPS),
        Field("global_batch", INT, "train: sequences per optimizer step over all replicas; `batch` (per "
              "replica) is then global_batch / (dp·ep), and a layout that does not split it into whole "
              "sequences is E303 (a search keeps only the layouts that hold it)", "512", phases=("train",),
              **R_TOKENS),
        Field("global_batch_tokens", INT, "train: the global batch in tokens (instead of `global_batch`): "
              "global_batch = global_batch_tokens / seq", "4_194_304", phases=("train",), **R_GLOBAL_BATCH_TOKENS),
        Field("microbatch_size", INT, "train: sequences per micro-batch; `microbatches` is then batch / "
              "microbatch_size, so with a global batch the micro-batches follow the layout: global_batch / "
              "(dp·ep·microbatch_size) (Megatron's micro-batch size)", "1", phases=("train",), **R_TOKENS),
        Field("deadline", TIME, "train: the time the target must be trained in (checklist item 13; a search "
              "keeps the layouts that meet it)", "60 d", phases=("train",), **R_DEADLINE),
        Field("gpu_budget", INT, "train: the most GPUs the target may use (checklist item 13; a search keeps "
              "the layouts within it)", "2048", phases=("train",), **R_GPUS),
        Field("checkpoint_interval", TIME, "train: training time between checkpoints, instead of the optimum "
              "(Daly's higher-order interval)", "30 min", phases=("train",), **R_CHECKPOINT_INTERVAL),
        *(_degree(a) for a in AXES if a.optional),
        Field("concurrency", INT, "serve: requests running at once per replica (per dp·ep rank group), a "
              "closed loop: a finished request is replaced at once. It is the batch of the serve step; `batch` "
              "is not read", "32", **R_TOKENS, required_if=_needs("concurrency"),
              required_doc=_needs_doc("concurrency"), phases=("serve",)),
        Field("input_tokens", INT, "serve: prompt tokens per request", "1024", **R_TOKENS,
              required_if=_needs("input_tokens"), required_doc=_needs_doc("input_tokens"), phases=("serve",)),
        Field("output_tokens", INT, "serve: tokens generated per request, at least 2 (the first comes from the "
              "prefill's last chunk; TPOT is the gap to the next ones)", "256", minimum=2, maximum=1e9,
              required_if=_needs("output_tokens"), required_doc=_needs_doc("output_tokens"),
              phases=("serve",)),
        Field("chunk_tokens", INT, "serve: chunked prefill, the most prompt tokens one step prefills (one "
              "request's chunk per step)", "512", **R_TOKENS,
              default_doc="`input_tokens` (the whole prompt in one step: no chunking)", phases=("serve",)),
        Field("traffic", ref("traffic"), "online: the traffic the plan serves (its rates and request lengths)",
              "chat", required_if=_needs("traffic"), required_doc=_needs_doc("traffic"), phases=("online",)),
        Field("max_seqs", INT, "online: running requests an engine holds at most (vLLM's `max_num_seqs`); more "
              "wait for a slot", "256", **R_TOKENS, phases=("online",)),
        Field("step_tokens", INT, "online: tokens one engine step computes at most, decode rows and prompt chunks "
              "together (vLLM's `max_num_batched_tokens`: chunked prefill)", "8192",
              **R_TOKENS, phases=("online",)),
        Field("prefill_workers", INT, "online: disaggregated serving, prefill workers per replica (each tp = "
              "`prefill_tp`, the plan's pp and ep); 0 is aggregated", "6", minimum=0, maximum=MAX_DEGREE,
              phases=("online",)),
        Field("decode_workers", INT, "online, disaggregated: decode workers per replica (each the plan's layout)",
              "1", minimum=1, maximum=MAX_DEGREE, phases=("online",)),
        Field("prefill_tp", INT, "online, disaggregated: the prefill workers' tensor-parallel degree", "2",
              default_doc="the plan's `tp`", minimum=1, maximum=MAX_DEGREE, phases=("online",)),
    ),
    "plans", S.Plan,
    'plan tp8 "TP=8 decode, batch 32" {\n  model = llama3_70b; cluster = hgx\n  phase = decode; batch = 32\n'
    '  tp = 8\n  allreduce = ring\n}\nplan tp8_tree extends tp8 { allreduce = tree }',
    build=_build_plan,
))


def _build_sweep(ctx: BuildContext) -> S.Sweep:
    return S.Sweep(ctx.name, ctx.title, ctx.span, ctx.spans, base=ctx.values["base"], fields=ctx.varied,
                   objective=ctx.values.get("objective"))


register(BlockKind(
    "sweep", "One plan, some fields varied: `base = PLAN` and one or more plan fields with a list of values "
    "(`tp = [1, 2, 4, 8]`); several lists form their cartesian product. Each value is checked like the plan "
    "field it sets; a single value fixes that field for every point. Points are not held to the size of the "
    "cluster (worked example A4 sweeps TP to 64 on one 8-GPU node), and a sweep has at most 100,000 points.",
    (
        Field("base", ref("plan"), "the plan every point starts from", "tp8", required=True),
        Field("objective", enum(*SWEEP_OBJECTIVES), "serving plans (`serve`, `online`): what picks the optimum "
              "among the points that fit memory and meet the policy — the lowest cost per million tokens, the "
              "most tokens/s per GPU, or the lowest request latency, TTFT or TPOT (an online plan's at the SLO "
              "percentile, at the peak); a serving plan's sweep is not ranked by efficiency against one GPU",
              "cost_per_token", default_doc="`cost_per_token` when the cluster is priced, else "
              "`throughput_per_gpu`"),
    ),
    "sweeps", S.Sweep,
    'sweep tp_scaling "When does TP stop helping?" {\n  base = tp8\n  tp = [1, 2, 4, 8, 16, 32, 64]\n}',
    varies="plan", build=_build_sweep,
))


register(BlockKind(
    "compare", "Plans side by side, ranked by one measure, with a recommendation.",
    (
        Field("plans", list_of(ref("plan")), "the plans to compare", "[tp16, tp8_pp2]", required=True),
        Field("by", enum(*COMPARE_BY), "what ranks them: per-step latency, throughput, overhead, efficiency, "
              "cost per million tokens (every plan priced) or tokens/s per GPU", "throughput"),
    ),
    "compares", S.Compare,
    'compare algorithms "Ring or tree for TP=8 decode?" {\n  plans = [tp8, tp8_tree]\n  by = latency\n}',
))


def _build_search(ctx: BuildContext):
    return S.Search(ctx.name, ctx.title, ctx.span, ctx.spans, axes=tuple(ctx.varied), **ctx.values)


register(BlockKind(
    "search", "Every layout of one plan at once: `base = PLAN` and lists or ranges of values for "
    # the parallel degrees a search varies, from the axis registry (cp among them)
    + ", ".join(f"`{a.name}`" for a in AXES if a.searchable) + ", "
    "`batch`, `microbatches`, `seq`, `overlap` (numbers, evaluated as arrays), `allreduce`, "
    "`fsdp`, `cross_node`, `one_shot_volume` and, for training, `recompute`, `sequence_parallel`, "
    "`optimizer_sharding`, `schedule`, `virtual_stages` (one pass per value) and the fleet axes `model`, `cluster`, `phase`, "
    "`stack` (names of declared blocks, or phases: each combination is a sub-space with its own model and "
    "cluster, and the results rank the whole fleet together); the lists form their cartesian product (`tp = pow2(1, 64)`, "
    "`batch = [1, 8, 64]`, `allreduce = [ring, tree, auto]`). Every point is priced by the same formulas as "
    "a plan and kept or rejected by the constraints below. The result: the `top` layouts by the objective "
    "with their numbers, the Pareto front of latency against throughput per GPU, and how many points each "
    "constraint removed. A search larger than `limit` points is refused (E402). A base plan with a training "
    "target (`train_tokens`) adds each layout's time to train, goodput, GPU-days and cost, the Pareto front "
    "of time to train against cost, and its own constraints: a `global_batch` keeps only the layouts that "
    "hold it (each gets batch = global_batch / (dp·ep)), a `deadline` only those that meet it, a `gpu_budget` "
    "caps `max_gpus`. A search whose base is "
    "an online plan (`phase = online`) is a **capacity search** (ccost.capacity): it varies `cluster`, `tp`, `pp`, "
    "`ep`, `dp` (replicas: every count that fits `max_gpus` when not listed), `max_seqs`, `step_tokens`, "
    "`prefill_workers` (0: aggregated), `decode_workers` and `prefill_tp`, screens every fleet at the traffic's "
    "peak rate × (1 + `headroom`) against the policy's SLOs, confirms the cheapest by simulation and reports it, "
    "aggregated and disaggregated, with N+1, the Pareto front of cost against p99 latency and each layout's "
    "highest rate per replica.",
    (
        Field("base", ref("plan"), "the plan every point starts from", "tp8", required=True),
        Field("objective", enum("latency", "throughput_per_gpu", "gpus", "cost_per_token", "time_to_train",
                                "train_cost", "cost_per_month"),
              "what ranks the layouts: the lowest step latency, the highest tokens/s per GPU, the fewest "
              "GPUs (ties: the faster), the lowest cost per million tokens (the cluster must be priced), or, "
              "for a base plan with a training target, the shortest time to train or its lowest cost (priced); a "
              "capacity search (an online base) ranks fleets, by default by `cost_per_month` (on priced "
              "clusters, else `gpus`), its `latency` the request latency at the SLO's percentile",
              "throughput_per_gpu"),
        Field("top", INT, "how many of the best layouts to list", "20", minimum=1, maximum=1000),
        Field("limit", INT, "the most points the search may have (about a second per million points)",
              "50_000_000", default_doc="`10_000_000`", minimum=1, maximum=1_000_000_000),
        Field("max_gpus", INT, f"keep layouts with {label()} at most this", "64",
              default_doc="the cluster's GPUs", **R_GPUS),
        Field("fits_memory", BOOL, "keep layouts whose memory per GPU fits the policy's `max_memory` share of "
              "HBM", "false"),
        Field("tp_in_domain", BOOL, "keep layouts whose TP group stays inside one NVLink domain", "true"),
        Field("tp_divides_kv_heads", BOOL, "keep layouts whose tp divides the model's `kv_heads`", "true"),
        Field("pp_divides_layers", BOOL, "keep layouts whose pp divides the model's `layers`", "true"),
        Field("max_overhead", FRACTION, "keep layouts whose overhead T_comm / T_compute is at most this",
              "30 %", default_doc="the file's policy (see `use_policy`), else off", **R_OVERHEAD),
        Field("min_efficiency", FRACTION, "keep layouts whose efficiency (speedup / GPUs) is at least this",
              "70 %", default_doc="the file's policy (see `use_policy`), else off", minimum=0, maximum=1),
        Field("use_policy", BOOL, "take `max_overhead` and `min_efficiency` from the file's `policy` block when "
              "they are not written here", "false", default_doc="`true` when the file has a `policy` block"),
        Field("headroom", FRACTION, "capacity searches (an online base): the fleet must meet the SLOs at the "
              "traffic's peak rate × (1 + headroom)", "20 %", minimum=0.0, maximum=10.0),
        Field("distinct", BOOL, "list each answer once in `top`: a layout whose latency, throughput per GPU "
              "and cost equal a better-ranked one's (it differs only in a value with no effect there, such as "
              "the AllReduce algorithm at tp = 1, or in replicas) is left out; `false` lists every layout",
              "false"),
    ),
    "searches", S.Search,
    'search layouts "Every layout of Llama-3-70B decode on one node" {\n  base = tp8\n'
    '  tp = pow2(1, 8); pp = pow2(1, 8); dp = pow2(1, 8)\n  batch = [1, 8, 32, 128]\n'
    '  allreduce = [ring, tree, auto]\n  max_gpus = 8; tp_divides_kv_heads = true\n'
    '  objective = throughput_per_gpu\n}',
    varies="plan",
    varies_doc="| `tp`, `pp`, `ep`, `dp`, `batch`, `microbatches`, `seq`, `overlap`, `allreduce`, `fsdp`, "
               "`cross_node`, `one_shot_volume`, `recompute`, `sequence_parallel`, `optimizer_sharding`, "
               "`schedule`, `virtual_stages`, `model`, `cluster`, `phase`, `stack` | a list (`[1, 2, 4]`, "
               "`[llama3_8b, llama3_70b]`), a range (`pow2(1, 64)`, `range(1, 16)`) or one value of that "
               "plan field | | at least one | the values to try; each is checked like the plan field (a `model` "
               "axis names models, E108 otherwise); a model × cluster × phase × stack combination that no "
               "layout can evaluate (a prefill without `seq`) is E404 |",
    build=_build_search,
))


def _build_policy(ctx: BuildContext) -> S.Policy:
    return S.Policy("policy", ctx.title, ctx.span, ctx.spans, **ctx.values)


register(BlockKind(
    "policy", "The checklist's thresholds. One unnamed `policy` block per file at most; an imported file's "
    "policy does not apply to the importing file.",
    (
        Field("max_overhead", FRACTION, "communication / compute above this fails the checklist", "30 %",
              **R_OVERHEAD),
        Field("min_efficiency", FRACTION, "scaling efficiency below this fails the checklist", "70 %",
              minimum=0, maximum=1),
        Field("max_memory", FRACTION, "share of GPU memory a plan may use", "90 %", minimum=0,
              min_open=True, maximum=1),
        Field("max_cost_per_mtok", MONEY, "cost per million tokens (at the plan's `load`) above this fails "
              "the checklist; every plan must then be priced", "2 USD", **R_COST),
        Field("max_ttft", TIME, "SLO of online plans: time to first token at `slo_percentile`, at the peak rate, "
              "queueing included; above it fails the checklist", "1 s", **R_SLO),
        Field("max_tpot", TIME, "SLO of online plans: time per output token (inter-token latency) at "
              "`slo_percentile`, at the peak rate", "30 ms", **R_SLO),
        Field("max_e2e", TIME, "SLO of online plans: request latency (arrival to last token) at `slo_percentile`, "
              "at the peak rate", "20 s", **R_SLO),
        Field("slo_percentile", enum(*S.SLO_PERCENTILES), "the percentile the SLOs hold at", "p90"),
        Field("min_slo_goodput", FRACTION, "SLO of online plans: the least share of requests that meet every limit "
              "above, each on its own (vLLM's `--goodput`)", "95 %", minimum=0, min_open=True, maximum=1),
        Field("min_goodput", FRACTION, "training targets: an expected goodput below this fails the checklist "
              "(item 14)", "90 %", minimum=0, maximum=1),
    ),
    "policy", S.Policy,
    "policy { max_overhead = 30 %; min_efficiency = 70 % }",
    named=False, build=_build_policy,
))


# --------------------------------------------------------------------------------------------------
# Expressions and keywords

FUNCTIONS: dict[str, tuple[str, str]] = {
    # name: (signature, doc)
    "min": ("min(a, b, ...)", "the smallest argument; all of one dimension"),
    "max": ("max(a, b, ...)", "the largest argument; all of one dimension"),
    "ceil": ("ceil(x)", "round a plain number up"),
    "floor": ("floor(x)", "round a plain number down"),
    "log2": ("log2(x)", "base-2 logarithm of a positive plain number"),
    "sqrt": ("sqrt(x)", "square root; the dimension must be a square (a plain number, say)"),
    # Range functions give a list of values, for `sweep` and `search` fields (ccost.search).
    "pow2": ("pow2(lo, hi)", "the powers of two from lo to hi, both included: `pow2(1, 64)` is "
             "`[1, 2, 4, 8, 16, 32, 64]`; a list, for `sweep` and `search` fields"),
    "range": ("range(lo, hi[, step])", "lo, lo + step, ... up to hi, both included: `range(1, 4)` is "
              "`[1, 2, 3, 4]`; at most 100,000 values; a list, for `sweep` and `search` fields"),
}
#: Functions whose value is a list of numbers (``range_values``).
LIST_FUNCTIONS = frozenset({"pow2", "range"})
#: Values a range function may produce (``range(1, 1e9)`` is a typo, not a study).
MAX_RANGE_VALUES = 100_000


def range_values(func: str, args: list[float]) -> list[int] | str:
    """The values of a range function, or an error sentence.

    ``pow2(lo, hi)``: the powers of two from lo to hi, both included (``pow2(1, 64)`` = 1, 2, 4, ..., 64).
    ``range(lo, hi)`` / ``range(lo, hi, step)``: lo, lo + step, ... up to hi, both ends included."""
    if not all(float(a).is_integer() for a in args):
        return f"`{func}` takes whole numbers"
    a = [int(x) for x in args]
    if func == "pow2":
        if len(a) != 2:
            return "`pow2` takes two arguments: pow2(lo, hi)"
        lo, hi = a
        if lo < 1 or hi < lo:
            return f"`pow2({lo}, {hi})` needs 1 ≤ lo ≤ hi"
        out, p = [], 1
        while p <= hi:
            if p >= lo:
                out.append(p)
            p *= 2
        return out or f"`pow2({lo}, {hi})` contains no power of two"
    if func == "range":
        if len(a) not in (2, 3):
            return "`range` takes two or three arguments: range(lo, hi) or range(lo, hi, step)"
        lo, hi = a[0], a[1]
        step = a[2] if len(a) == 3 else 1
        if step < 1 or hi < lo:
            return "`range` needs lo ≤ hi and a step of at least 1"
        count = (hi - lo) // step + 1
        if count > MAX_RANGE_VALUES:
            return f"`range({', '.join(map(str, a))})` has {count:,} values, more than {MAX_RANGE_VALUES:,}"
        return list(range(lo, hi + 1, step))
    return f"unknown range function `{func}`"


#: Words of the language besides the block kinds; with them, the words that are not names.
RESERVED_WORDS = ("import", "extends", "true", "false")


def block_kinds() -> tuple[str, ...]:
    """The block kinds, in the order of this table (and of the docs). The parser's grammar rule and
    keyword terminals, its messages and the Pygments lexer are generated from this list."""
    return tuple(SCHEMA)


def keywords() -> frozenset[str]:
    """Words that are not names (docs/language.md)."""
    return frozenset(set(RESERVED_WORDS) | set(SCHEMA))


# --------------------------------------------------------------------------------------------------
# The generated language reference


def markdown() -> str:
    """The language reference (``docs/language.md``), generated from this table and the units table."""
    from ccost.diagnostics import CODES, RESERVED

    out: list[str] = []
    w = out.append
    w("# The .ccost language reference")
    w("")
    w("<!-- Generated by `ccost schema` from compiler/ccost/schema.py. Do not edit by hand: run "
      "`ccost schema > docs/language.md`. -->")
    w("")
    w("A spec is a list of `import \"PATH\"` lines and blocks `KIND NAME [\"TITLE\"] [extends OTHER] "
      "{ members }`. Members are `field = expression`, separated by a newline or `;`. `#` starts a comment. "
      "A block that `extends` another of its kind starts from a copy of its members and overrides the ones "
      "it names. Names are unique in a file and its imports.")
    w("")
    w("## Block kinds")
    w("")
    for kind in SCHEMA.values():
        w(f"- [`{kind.name}`](#{kind.name}) — {kind.doc.split('. ')[0].rstrip('.')}.")
    w("")
    for kind in SCHEMA.values():
        w(f"### {kind.name}")
        w("")
        w(kind.doc)
        w("")
        w("```ccost")
        w(kind.example)
        w("```")
        w("")
        w("| field | type | default | required | meaning |")
        w("|---|---|---|---|---|")
        for f in kind.fields:
            req = "yes" if f.required else (f.required_doc or "")
            rng = f.range_text()
            meaning = f.doc + (f"; {rng}" if rng else "")
            w(f"| `{f.name}` | {f.type.doc_type()} | {f.default_text()} | {req} | {meaning} |")
        if kind.varies_doc:
            w(kind.varies_doc)
        elif kind.varies:
            w(f"| *any `{kind.varies}` field* | a list of values of that field | | at least one | "
              "the values to try |")
        w("")
    w("## Units")
    w("")
    w("A number followed by a unit is a quantity, checked by dimension where it lands in a field. Inside, "
      "everything is an SI float: seconds, bytes, FLOP. `B` is always byte (counts are plain numbers). "
      "Decimal prefixes (`k`/`K`, `M`, `G`, `T`, `P`) are powers of 1000, binary ones (`Ki`, `Mi`, `Gi`, "
      "`Ti`, `Pi`) powers of 1024.")
    w("")
    w("| dimension | example | units |")
    w("|---|---|---|")
    by_dim: dict[Dim, list[str]] = {}
    for unit in U.KNOWN_UNITS:
        _, d = U.parse_unit(unit)
        by_dim.setdefault(d, []).append(unit)
    for d, names in by_dim.items():
        label = "a fraction (a plain number)" if d == U.DIMENSIONLESS else U.dim_name(d)
        w(f"| {label} | `{U.DIM_EXAMPLES.get(d, '') if d else '30 %'}` | " + ", ".join(f"`{n}`" for n in names) + " |")
    w("")
    w("Common misspellings are errors with a suggestion: " + ", ".join(
        f"`{k}` → `{v}`" for k, v in list(U.COMMON_MISTAKES.items())[:6]) + ".")
    w("")
    w("## Expressions")
    w("")
    w("`+ - * /`, parentheses, unary minus, lists `[a, b]`, references `NAME` (a block, or a value of an "
      "enumerated field such as `ring`) and `NAME.FIELD` (`h100.memory * 0.9`: a field of another block, "
      "written, inherited or defaulted). Units follow through arithmetic: adding a time to a size is an "
      "error, dividing a size by a time gives a bandwidth. A division by zero or a result that is not a "
      "finite number is an error. A spec never runs code.")
    w("")
    w("| function | meaning |")
    w("|---|---|")
    for sig, doc in FUNCTIONS.values():
        w(f"| `{sig}` | {doc} |")
    w("")
    from ccost.userfiles import size_text

    depth = MAX_IMPORT_DEPTH

    w("## Imports")
    w("")
    w("`import \"PATH\"` brings in every block of another file. A relative path is relative to the importing "
      "file; `\"std/...\"` names the library bundled with ccost (GPUs, links, clusters and models, such as "
      "`std/gpus.ccost` and `std/links.ccost`). A file sees the names of the files it imports (and theirs). Import cycles and "
      "missing files are errors that show the chain of imports. An imported file's `policy` does not apply "
      "to the importing file.")
    w("")
    w("**Imports stay inside the project.** The project of a spec is the git work tree that holds it (the "
      "nearest folder upwards with a `.git` entry), or the spec's own folder when it is not in git; "
      "`ccost fmt -` and other text without a file use the current folder. A spec may import any file "
      "inside its project, and a file of the bundled library may import only its siblings in `std/`. "
      "Refused with E113, before anything is read: an absolute path, a path whose `..` climbs out of the "
      f"project (or out of `std/`), a symbolic link that leads outside it, imports nested more than {depth} "
      "files deep. A file that is not a regular file (a folder, a FIFO, a device such as `/dev/zero`) or "
      f"larger than {size_text(MAX_FILE_BYTES)} is refused with E002. None of these messages shows a byte of the refused file. "
      "Files are identified with symbolic links resolved, so a link back to the importing file is an "
      "import cycle.")
    w("")
    w("## Diagnostics")
    w("")
    w("Every error and warning is reported as `FILE:LINE:COL: error[CODE]: message`, with the source line, "
      "a caret under the place, and a `= help:` line where there is a fix. `ccost check` reports all of a "
      "file's errors in one run and exits 2 when there is one.")
    w("")
    w("| code | meaning |")
    w("|---|---|")
    for code, meaning in CODES.items():
        w(f"| {code} | {meaning}" + (f" (reserved, not raised: {RESERVED[code]})" if code in RESERVED else "")
          + " |")
    w("")
    return "\n".join(out)
