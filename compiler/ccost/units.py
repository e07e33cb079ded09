"""The project's Pint registry, and quantity parsing and formatting at the boundary.

Quantities are checked here (DESIGN principle 2) and handed on as SI floats: seconds, bytes, FLOP, and
their quotients. A dimension is a ``Dim``: a sorted tuple of (base dimension, exponent), so that the
checker and the derivation values can do unit algebra on floats without Pint arithmetic, which is ~50x
slower.

Base units in SI floats: time in seconds, information in **bytes** (not bits), compute in FLOP.
"""

from __future__ import annotations

import difflib
import math
import re
from functools import lru_cache
from pathlib import Path

Dim = tuple[tuple[str, int], ...]

DIMENSIONLESS: Dim = ()
TIME: Dim = (("time", 1),)
INFORMATION: Dim = (("information", 1),)
COMPUTE: Dim = (("compute", 1),)
BANDWIDTH: Dim = (("information", 1), ("time", -1))
FLOP_RATE: Dim = (("compute", 1), ("time", -1))
RATE: Dim = (("time", -1),)  # a count per second (tokens/s)
ENERGY: Dim = (("energy", 1),)
POWER: Dim = (("energy", 1), ("time", -1))
MONEY: Dim = (("currency", 1),)
MONEY_RATE: Dim = (("currency", 1), ("time", -1))  # a price per hour: USD/h
ENERGY_PRICE: Dim = (("currency", 1), ("energy", -1))  # USD/kWh
PER_ENERGY: Dim = (("energy", -1),)  # a count per joule (tokens/J)

DIM_NAMES: dict[Dim, str] = {
    DIMENSIONLESS: "a plain number",
    TIME: "a time",
    INFORMATION: "an amount of information",
    COMPUTE: "an amount of compute",
    BANDWIDTH: "a bandwidth (information per time)",
    FLOP_RATE: "a compute rate (FLOP per time)",
    ENERGY: "an amount of energy",
    POWER: "a power (energy per time)",
    MONEY: "an amount of money",
    MONEY_RATE: "a price per time (money per time)",
    ENERGY_PRICE: "a price of energy (money per energy)",
}

DIM_EXAMPLES: dict[Dim, str] = {
    DIMENSIONLESS: "8",
    TIME: "2 us",
    INFORMATION: "80 GB",
    COMPUTE: "287 TFLOP",
    BANDWIDTH: "450 GB/s",
    FLOP_RATE: "989 TFLOP/s",
    ENERGY: "1 kWh",
    POWER: "700 W",
    MONEY: "1000 USD",
    MONEY_RATE: "3.78 USD/h",
    ENERGY_PRICE: "0.12 USD/kWh",
}

# What each base dimension is counted in, as an SI float.
_BASE_UNIT = {"time": "second", "information": "byte", "compute": "FLOP", "energy": "joule", "currency": "USD"}

# Misspellings that users type, with the unit they meant.
COMMON_MISTAKES = {
    "GBps": "GB/s", "MBps": "MB/s", "TBps": "TB/s", "KBps": "KB/s", "kBps": "kB/s",
    "Gbps": "Gbit/s", "Mbps": "Mbit/s", "Tbps": "Tbit/s",
    "GiBps": "GiB/s", "TFLOPs": "TFLOP/s", "tflops": "TFLOP/s", "Tflops": "TFLOP/s",
    "GFLOPs": "GFLOP/s", "PFLOPs": "PFLOP/s", "usec": "us", "msec": "ms", "nsec": "ns",
    "secs": "s", "mins": "min", "Gb/s": "Gbit/s", "gbps": "Gbit/s", "GBs": "GB/s",
    "GB/sec": "GB/s", "gb": "GB", "mb": "MB", "kb": "kB", "tb": "TB",
}

# Units a user may write, for did-you-mean suggestions.
KNOWN_UNITS = [
    "s", "ms", "us", "µs", "ns", "min", "h", "d", "day", "week",
    "bit", "b", "B", "byte", "kB", "KB", "MB", "GB", "TB", "PB", "KiB", "MiB", "GiB", "TiB",
    "Kbit", "Mbit", "Gbit", "Tbit", "Gb",
    "FLOP", "GFLOP", "TFLOP", "PFLOP",
    "GB/s", "TB/s", "MB/s", "GiB/s", "Gbit/s", "Tbit/s", "GFLOP/s", "TFLOP/s", "PFLOP/s",
    "TFLOPS", "PFLOPS", "GFLOPS", "%",
    "W", "kW", "MW", "J", "kJ", "MJ", "Wh", "kWh", "MWh", "USD", "USD/h", "USD/kWh", "USD/MWh",
]


class UnitError(ValueError):
    """A unit that the registry does not know. ``suggestion`` is the unit the user probably meant."""

    def __init__(self, unit: str, suggestion: str | None):
        self.unit = unit
        self.suggestion = suggestion
        super().__init__(f"unknown unit `{unit}`")


_registry = None


def registry():
    """The one Pint registry of ccost, built on first use (~5 ms) from ``units.txt``."""
    global _registry
    if _registry is None:
        import pint

        _registry = pint.UnitRegistry(filename=str(Path(__file__).with_name("units.txt")),
                                      autoconvert_offset_to_baseunit=False)
    return _registry


def suggest_unit(unit: str, dim: Dim | None = None) -> str | None:
    """The unit ``unit`` was probably meant to be: a known misspelling (``GBps``), the same letters in the
    right case (``gb/s`` → ``GB/s``, also part by part around ``/``), else the closest spelling. Case comes
    before closeness: difflib alone turns ``gb/s`` into ``Tbit/s``. With ``dim`` (what the field needs),
    only units of that dimension are suggested: ``usec`` is no bandwidth."""
    def fits(u: str | None) -> bool:
        if u is None:
            return False
        if dim is None:
            return True
        try:
            return parse_unit(u)[1] == dim
        except UnitError:
            return False

    from ccost.units_table import UNITS

    known = [u for u in KNOWN_UNITS if fits(u)]
    if unit in COMMON_MISTAKES and fits(COMMON_MISTAKES[unit]):
        return COMMON_MISTAKES[unit]
    # every spelling the table knows (`Gbyte/s`), the usual ones (`GB/s`) winning a clash of case
    every = {u.lower(): u for u in [*UNITS, *KNOWN_UNITS]}
    lowered = {k: u for k, u in every.items() if fits(u)}
    if unit.lower() in lowered:
        return lowered[unit.lower()]
    if "/" in unit:
        parts = [p.strip() for p in unit.split("/")]
        fixed = [p if p in KNOWN_UNITS else COMMON_MISTAKES.get(p) or every.get(p.lower()) for p in parts]
        if all(fixed) and fixed != parts and fits("/".join(fixed)):  # type: ignore[arg-type]
            return "/".join(fixed)  # type: ignore[arg-type]
    close = difflib.get_close_matches(unit, known, n=1, cutoff=0.6)
    return close[0] if close else None


def bit_reading(typed: str, suggestion: str) -> str | None:
    """``gb/s`` → ``GB/s`` is a guess: a lower-case ``b`` often means bits. The bit unit it could have
    meant (``Gbit/s``), or None when the typed unit has no lower-case ``b``."""
    if "b" not in typed.replace("bit", "").replace("byte", "") or "B" not in suggestion:
        return None
    alt = suggestion.replace("iB", "ibit").replace("B", "bit")
    try:
        parse_unit(alt)
    except UnitError:
        return None
    return alt


# A milli-prefixed amount (`mb`, `mB`, `mbit`, `mFLOP`): valid to Pint, meaningless in a spec.
_MILLI_AMOUNT = re.compile(r"(?<![A-Za-z])m(b|B|bit|byte|FLOP)(?![A-Za-z])")


@lru_cache(maxsize=512)
def parse_unit(unit: str) -> tuple[float, Dim]:
    """``"GB/s"`` → (1e9, BANDWIDTH): the factor to SI floats (bytes, seconds, FLOP) and the dimension.

    Raises ``UnitError`` with a suggestion for a unit the registry does not know.
    """
    text = unit.strip()
    if text in COMMON_MISTAKES and text not in ("Gb/s",):
        raise UnitError(unit, COMMON_MISTAKES[text])
    if text == "%":
        return 0.01, DIMENSIONLESS
    milli = _MILLI_AMOUNT.sub(lambda m: "M" + m.group(1), text)
    if milli != text:  # `mb/s` would be a thousandth of a bit per second: surely MB/s was meant
        raise UnitError(unit, milli)
    spelled = text.replace("μ", "µ")
    # The common path: the units users write, precomputed from this registry (importing Pint costs ~0.25 s,
    # more than the rest of `ccost check`). Pint stays the source of truth for everything else, and a
    # test recomputes every entry of the table through it.
    from ccost.units_table import UNITS

    hit = UNITS.get(spelled)
    if hit is not None:
        return hit
    return _parse_with_pint(unit, text, spelled)


def _parse_with_pint(unit: str, text: str, spelled: str) -> tuple[float, Dim]:
    """``parse_unit`` through the Pint registry, for units that are not in ``units_table``."""
    try:
        ureg = registry()
        q = ureg.Quantity(1.0, ureg.parse_units(spelled.replace("µ", "u")))
    except Exception:  # pint raises several types for bad units; all mean "unknown unit" here
        raise UnitError(unit, suggest_unit(text)) from None
    dims = q.dimensionality
    dim: list[tuple[str, int]] = []
    base_units = []
    for name, exp in sorted(dims.items()):
        clean = name.strip("[]")
        if clean not in _BASE_UNIT or exp != int(exp):
            raise UnitError(unit, suggest_unit(text))
        dim.append((clean, int(exp)))
        base_units.append(f"{_BASE_UNIT[clean]} ** {int(exp)}")
    target = " * ".join(base_units) if base_units else "dimensionless"
    factor = float(q.to(target).magnitude)
    return factor, tuple(dim)


def dim_mul(a: Dim, b: Dim, sign: int = 1) -> Dim:
    exps = dict(a)
    for name, e in b:
        exps[name] = exps.get(name, 0) + sign * e
    return tuple(sorted((k, v) for k, v in exps.items() if v != 0))


def dim_div(a: Dim, b: Dim) -> Dim:
    return dim_mul(a, b, -1)


def dim_pow(a: Dim, p: int) -> Dim:
    return tuple((k, v * p) for k, v in a if v * p != 0)


def dim_name(d: Dim) -> str:
    if d in DIM_NAMES:
        return DIM_NAMES[d]
    return "a quantity in " + unit_of_dim(d)


def unit_of_dim(d: Dim) -> str:
    """The SI spelling of a dimension: ``B/s``, ``FLOP``, ``s``."""
    short = {"time": "s", "information": "B", "compute": "FLOP", "energy": "J", "currency": "USD"}
    num = [short[k] + (f"^{v}" if v != 1 else "") for k, v in d if v > 0]
    den = [short[k] + (f"^{-v}" if v != -1 else "") for k, v in d if v < 0]
    text = "·".join(num) or "1"
    if den:
        text += "/" + "·".join(den)
    return "" if not d else text


def parse_quantity(text: str) -> tuple[float, Dim]:
    """``"450 GB/s"`` → (4.5e11, BANDWIDTH). For tools and tests; specs go through the grammar."""
    text = text.strip()
    i = 0
    while i < len(text) and (text[i].isdigit() or text[i] in "._+-eE"):
        if text[i] in "eE" and not (i + 1 < len(text) and (text[i + 1].isdigit() or text[i + 1] in "+-")):
            break
        i += 1
    number = float(text[:i].replace("_", ""))
    unit = text[i:].strip()
    if not unit:
        return number, DIMENSIONLESS
    factor, dim = parse_unit(unit)
    return number * factor, dim


# ---------------------------------------------------------------------------------------------------
# Formatting: SI floats back to what a reader expects (`512 KiB`, `4.48 ms`, `450 GB/s`).

DAY_S = 86400.0
_TIME_STEPS = [(1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns")]
_DEC = [(1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, "")]
_BIN = [(2.0**50, "Pi"), (2.0**40, "Ti"), (2.0**30, "Gi"), (2.0**20, "Mi"), (2.0**10, "Ki"), (1.0, "")]


#: Beyond these magnitudes a number is written with an exponent (``1.667e298``), so that no value,
#: however large or small, prints as hundreds of digits.
_PLAIN_MAG = (-9, 15)


def _sig(x: float, digits: int) -> str:
    """Round to ``digits`` significant figures: plain digits for the magnitudes we print (1e-9 to 1e15),
    an exponent beyond them (``1.234e-12``, ``1e300``), so the width stays sane whatever the value."""
    if x == 0 or not math.isfinite(x):
        return "0" if x == 0 else str(x)
    mag = math.floor(math.log10(abs(x)))
    if not _PLAIN_MAG[0] <= mag < _PLAIN_MAG[1]:
        mant, exp = f"{x:.{max(digits - 1, 0)}e}".split("e")
        if "." in mant:
            mant = mant.rstrip("0").rstrip(".")
        return f"{mant}e{int(exp)}"
    decimals = max(digits - 1 - mag, 0)
    text = f"{x:.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def _pick(value: float, steps) -> tuple[float, str]:
    for factor, prefix in steps:
        if abs(value) >= factor * 0.9995:
            return value / factor, prefix
    return value / steps[-1][0], steps[-1][1]


def _is_binary(value: float) -> bool:
    """Bytes that are a whole multiple of 1 KiB and not of 1 kB read better in binary units."""
    if value <= 0 or value != int(value):
        return False
    v = int(value)
    return v % 1024 == 0 and (v % 1000 != 0 or v % (1 << 20) == 0)


def format_quantity(value: float, dim: Dim, digits: int = 4, binary: bool | None = False) -> str:
    """Format an SI float of dimension ``dim`` with a readable prefix.

    Bytes are decimal (kB, MB, GB: 1e3, 1e6, 1e9), the one convention of every output, so that weights,
    messages and memory read against the 80 GB of a GPU without a second unit system (issue 10).
    ``binary=True`` forces KiB/MiB/GiB; ``binary=None`` picks binary for whole multiples of 1 KiB (the
    ``--sizes`` syntax of ``ccost calibrate`` uses it to write back exactly what was typed).

    >>> format_quantity(524288, INFORMATION)
    '524.3 kB'
    >>> format_quantity(524288, INFORMATION, binary=None)
    '512 KiB'
    >>> format_quantity(0.00448, TIME)
    '4.48 ms'
    >>> format_quantity(450e9, BANDWIDTH)
    '450 GB/s'
    """
    if value is None:
        return "—"
    if isinstance(value, bool):
        return str(value).lower()
    value = float(value)
    if not math.isfinite(value):
        return "∞" if value > 0 else ("-∞" if value < 0 else "NaN")
    if dim == DIMENSIONLESS:
        if value == int(value) and abs(value) < 1e15:
            return f"{int(value):,}"
        return _sig(value, digits)
    if dim == TIME:
        if value == 0:
            return "0 s"
        if 1e15 > abs(value) >= 2 * DAY_S and value % DAY_S == 0:  # whole days: a deadline of 60 d
            return f"{int(value // DAY_S):,} d"
        if 1e15 > abs(value) >= 3600 and value % 3600 == 0:  # whole hours: a month is 730 h, not 43800 min
            return f"{int(value // 3600):,} h"
        if abs(value) >= 2 * DAY_S:  # a run's calendar: 61.3 d, not 88,270 min
            return f"{_sig(value / DAY_S, digits)} d"
        if abs(value) >= 3 * 3600:  # a day or so between interruptions: 24.75 h, not 1,485 min
            return f"{_sig(value / 3600, digits)} h"
        if abs(value) >= 120:
            return f"{_sig(value / 60, digits)} min"
        v, unit = _pick(value, _TIME_STEPS)
        return f"{_sig(v, digits)} {unit}"
    if dim == INFORMATION:
        use_bin = _is_binary(value) if binary is None else binary
        v, prefix = _pick(value, _BIN if use_bin else _DEC)
        return f"{_sig(v, digits)} {prefix}B"
    if dim == BANDWIDTH:
        v, prefix = _pick(value, _DEC)
        return f"{_sig(v, digits)} {prefix}B/s"
    if dim == COMPUTE:
        v, prefix = _pick(value, _DEC)
        return f"{_sig(v, digits)} {prefix}FLOP"
    if dim == FLOP_RATE:
        v, prefix = _pick(value, _DEC)
        return f"{_sig(v, digits)} {prefix}FLOP/s"
    if dim == POWER:
        v, prefix = _pick(value, _DEC[3:])  # W, kW, MW, GW
        return f"{_sig(v, digits)} {prefix}W"
    if dim == ENERGY:
        if abs(value) >= 3.6e9:  # a training run's energy reads in MWh and GWh, as a facility bills it
            v, prefix = _pick(value / 3600, _DEC[2:5])  # MWh, GWh, TWh
            return f"{_sig(v, digits)} {prefix}Wh"
        v, prefix = _pick(value, _DEC[3:])
        return f"{_sig(v, digits)} {prefix}J"
    if dim == MONEY:  # dollars and cents up to a million, then significant figures
        if 0.01 <= abs(value) < 1e6 or value == 0:
            return f"{value:,.2f} USD"
        if 1e6 <= abs(value) < 1e9:  # millions read as millions, not as a run of seven digits
            return f"{_sig(value / 1e6, digits)} M USD"
        return f"{_sig(value, digits)} USD"
    if dim == MONEY_RATE:  # a price per second reads as a price per hour
        return f"{_sig(value * 3600, digits)} USD/h"
    if dim == ENERGY_PRICE:  # per joule reads as per kWh
        return f"{_sig(value * 3.6e6, digits)} USD/kWh"
    if dim == PER_ENERGY:  # tokens/J: the count is in the step's name
        return f"{_sig(value, digits)}/J"
    if dim == RATE:  # tokens/s, steps/s: the count is in the step's name, the unit is "per second"
        if 0 < abs(value) < 1e-3:  # rare events (interruptions per GPU) read per hour
            return f"{_sig(value * 3600, digits)}/h"
        return f"{_sig(value, digits)}/s"
    return f"{_sig(value, digits)} {unit_of_dim(dim)}"


def format_percent(fraction: float, digits: int = 3) -> str:
    if fraction is None or not math.isfinite(fraction):
        return "—"
    return f"{_sig(fraction * 100, digits)} %"


# ---------------------------------------------------------------------------------------------------
# The precomputed table (``units_table.py``), regenerated with ``python -m ccost.units --regen``.

_TIME_UNITS = ["s", "sec", "ms", "us", "µs", "ns", "min", "h", "hr", "d", "day", "days", "week", "weeks"]
_SI_PREFIXES = ["", "k", "K", "M", "G", "T", "P", "E"]
_IEC_PREFIXES = ["Ki", "Mi", "Gi", "Ti", "Pi"]


def table_units() -> list[str]:
    """Every unit spelling the table holds: what users write, and more (all prefixes, rates per s)."""
    names: list[str] = list(_TIME_UNITS)
    amounts: list[str] = []
    for base in ("B", "bit", "b", "byte"):
        for p in _SI_PREFIXES + (_IEC_PREFIXES if base != "byte" else []):
            amounts.append(p + base)
    for p in _SI_PREFIXES:
        amounts.append(p + "FLOP")
    names += amounts
    names += [a + "/s" for a in amounts]
    names += [p + "FLOPS" for p in _SI_PREFIXES]
    for p in ("", "k", "M", "G"):  # power and energy
        names += [p + "W", p + "J", p + "Wh"]
    names += ["USD", "USD/h", "USD/hr", "USD/kWh", "USD/MWh"]
    names += [u for u in KNOWN_UNITS if u not in names and u != "%"]
    # drop spellings that parse_unit rejects as a common mistake before it looks at the table
    return [n for n in dict.fromkeys(names) if n not in COMMON_MISTAKES or n == "Gb/s"]


def _regen_table() -> str:
    lines = [
        '"""Units users write, with their factor to SI floats and their dimension: generated from the Pint',
        "registry in units.txt by `python -m ccost.units --regen`. Do not edit; tests/test_schema.py recomputes",
        'every entry through Pint."""',
        "",
        "# fmt: off",
        "UNITS = {",
    ]
    for name in table_units():
        factor, dim = _parse_with_pint(name, name, name)
        lines.append(f"    {name!r}: ({factor!r}, {dim!r}),")
    lines.append("}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    import sys

    if sys.argv[1:] == ["--regen"]:
        Path(__file__).with_name("units_table.py").write_text(_regen_table(), encoding="utf-8")
        print("wrote", Path(__file__).with_name("units_table.py"))
    else:
        print("usage: python -m ccost.units --regen", file=sys.stderr)
        raise SystemExit(2)
