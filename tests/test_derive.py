"""ccost.derive: derivation values, the three-mode operations, and how derivations print."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ccost import derive, units
from ccost.derive import DimensionError, Value, leaf, named, steps, to_text
from ccost.units import BANDWIDTH, DIMENSIONLESS, INFORMATION, TIME


def test_leaf_and_arithmetic_carry_value_and_dimension():
    alpha = leaf("α", 2e-6, TIME)
    bw = leaf("B", 450e9, BANDWIDTH)
    m = leaf("m", 524288, INFORMATION)
    t = alpha * 14 + m / bw
    assert isinstance(t, Value)
    assert t.dim == TIME
    # 2 µs × 14 = 28 µs; 524288 B / 450e9 B/s = 1.16508 µs
    assert t.value == 2e-6 * 14 + 524288 / 450e9
    assert (m / bw).dim == TIME
    assert (bw * alpha).dim == INFORMATION
    assert (-alpha).value == -2e-6
    assert (alpha - alpha).value == 0.0
    assert not (alpha - alpha) and bool(alpha)  # truthiness follows the value, as for floats
    assert abs(-alpha).value == 2e-6 and derive.formula(abs(-alpha)) == "|−α|"


def test_adding_different_dimensions_is_a_programming_error():
    with pytest.raises(DimensionError):
        leaf("α", 2e-6, TIME) + leaf("m", 1024, INFORMATION)
    with pytest.raises(DimensionError):
        leaf("α", 2e-6, TIME) + 1.0  # a bare number is dimensionless
    with pytest.raises(DimensionError):
        derive.maximum(leaf("α", 2e-6, TIME), leaf("m", 1.0, INFORMATION))
    with pytest.raises(DimensionError):
        leaf("α", 2e-6, TIME) < leaf("m", 1.0, INFORMATION)
    # A plain number beside a Value is an SI quantity of the Value's dimension, as in float mode:
    assert leaf("α", 2e-6, TIME) < 1e-3
    assert derive.maximum(leaf("α", 2e-6, TIME), 1e-3).dim == TIME
    assert derive.maximum(leaf("α", 2e-6, TIME), 1e-3).value == 1e-3
    with pytest.raises(DimensionError):
        derive.log2(leaf("m", 1024, INFORMATION))


def test_sum_of_values_works_and_adding_zero_is_identity():
    ts = [leaf("a", 1e-3, TIME), leaf("b", 2e-3, TIME)]
    total = sum(ts)
    assert total.value == 1e-3 + 2e-3 and total.dim == TIME


def test_comparisons_compare_values_and_remember_the_formula():
    p, g = leaf("P", 16), leaf("g", 8)
    cond = p <= g
    assert not cond
    assert cond.formula == "P ≤ g" and cond.substituted == "16 ≤ 8"
    assert p > g
    assert leaf("x", 3.0) == 3.0
    assert max(leaf("a", 1.0), leaf("b", 5.0)).name == "b"
    with pytest.raises(TypeError):
        np.array([1.0]) + p  # mixing array and derivation modes is refused, not turned into objects


def test_named_is_free_for_floats_and_arrays():
    a = np.arange(3.0)
    assert named("x", a) is a
    assert named("x", 2.5) == 2.5 and type(named("x", 2.5)) is float


def test_hops_step_reads_like_the_notes():
    p = leaf("P", 8, DIMENSIONLESS, "ranks in the TP group")
    hops = named("hops", 2 * (p - 1), "ring AllReduce hops")
    (inp, step) = steps(hops)
    assert inp.kind == "input" and inp.name == "P" and inp.result == "8"
    assert step.name == "hops"
    assert step.formula == "2·(P − 1)"
    assert step.substituted == "2 × (8 − 1)"
    assert step.value == 14.0 and step.result == "14"
    assert step.line() == "hops = 2·(P − 1) = 2 × (8 − 1) = 14  — ring AllReduce hops"


def test_parentheses_follow_precedence():
    a, b, c = leaf("a", 1.0), leaf("b", 2.0), leaf("c", 3.0)
    assert derive.formula(a - (b - c)) == "a − (b − c)"
    assert derive.formula((a - b) - c) == "a − b − c"
    assert derive.formula(a / (b * c)) == "a/(b·c)"
    assert derive.formula(a * b / c) == "a·b/c"
    assert derive.formula((a + b) * c) == "(a + b)·c"
    assert derive.formula(-(a + b)) == "−(a + b)"
    assert derive.formula(derive.log2(a)) == "log₂a"
    assert derive.formula(derive.log2(a * b)) == "log₂(a·b)"
    assert derive.formula(derive.ceil(a)) == "⌈a⌉"
    assert derive.formula(derive.sqrt(a + b)) == "√(a + b)"


def test_substituted_quantities_with_units_need_no_parentheses():
    m = leaf("volume", 917504, INFORMATION)
    bw = leaf("B", 450e9, BANDWIDTH)
    t = named("T_bw", m / bw)
    step = steps(t)[-1]
    assert step.formula == "volume/B"
    # 917504 B / 450e9 B/s = 2.03890 µs
    assert step.substituted == "917.5 kB / 450 GB/s"  # 917,504 B, decimal
    assert step.result == "2.039 µs"


def test_steps_are_ordered_and_deduplicated():
    alpha = leaf("α", 2e-6, TIME, "latency per hop", source="spec sheet")
    p = leaf("P", 8)
    hops = named("hops", 2 * (p - 1))
    lat = named("T_lat", alpha * hops)
    again = named("T_lat2", hops * 2 * alpha)
    names = [s.name for s in steps(lat, again)]
    assert names == ["α", "P", "hops", "T_lat", "T_lat2"]
    first = steps(lat)[0]
    assert first.source == "spec sheet"
    assert "source: spec sheet" in first.line()
    # Non-Values are skipped, so a float-mode result can be passed through.
    assert steps(1.0, None) == []
    # An anonymous top-level value still gets a step, called "result".
    assert steps(alpha * 2)[-1].name == "result"


def test_to_text_joins_lines_and_can_leave_out_inputs():
    p = leaf("P", 8)
    hops = named("hops", 2 * (p - 1))
    assert to_text(steps(hops)) == "P = 8\nhops = 2·(P − 1) = 2 × (8 − 1) = 14"
    assert to_text(steps(hops), inputs=False) == "hops = 2·(P − 1) = 2 × (8 − 1) = 14"


def test_maximum_records_the_winner():
    t_mem = named("T_mem", leaf("W", 17.625e9, INFORMATION) / leaf("HBM", 3.35e12, BANDWIDTH))
    t_flop = named("T_flop", leaf("F", 1e12, units.COMPUTE) / leaf("R", 600e12, units.FLOP_RATE))
    tc = named("T_compute", derive.maximum(t_mem, t_flop))
    step = steps(tc)[-1]
    assert step.formula == "max(T_mem, T_flop)"
    # 17.625e9 / 3.35e12 = 5.261 ms > 1e12 / 600e12 = 1.667 ms
    assert step.substituted == "max(5.261 ms, 1.667 ms)"
    assert step.result == "5.261 ms"
    assert step.note == "max is T_mem (5.261 ms)"
    assert tc.value == t_mem.value


def test_where_records_the_condition():
    p, g = leaf("P", 16), leaf("g", 8)
    x = named("x", derive.where(p <= g, leaf("a", 1.0), leaf("b", 2.0)))
    step = steps(x)[-1]
    assert x.value == 2.0
    assert step.formula == "b"
    assert step.note == "not P ≤ g: 16 ≤ 8 is false"


def test_choose_in_three_modes():
    opts = {"ring": 30.04e-6, "tree": 14.04e-6, "one_shot": 14.04e-6}
    label, best = derive.choose(opts)
    assert (label, best) == ("tree", 14.04e-6) and type(best) is float  # ties: the earlier option
    idx, arr = derive.choose({k: np.array([v, 1.0]) for k, v in opts.items()})
    assert idx.tolist() == [1, 0] and arr.tolist() == [14.04e-6, 1.0]
    vals = {k: leaf(f"T_{k}", v, TIME) for k, v in opts.items()}
    label, t = derive.choose(vals)
    assert label == "tree" and t.value == 14.04e-6
    step = steps(named("T", t))[-1]
    assert step.formula == "min(T_ring, T_tree, T_one_shot)"
    assert step.note == "cheapest: tree (14.04 µs)"


def test_choose_on_arrays_of_different_shapes_follows_argmin():
    """Options computed on sub-grids (a column, a row, the full block) are compared without stacking
    them; the answer is np.argmin's: the first strict minimum, a NaN beats every number, the first NaN
    wins. Written out by hand per element below."""
    nan = float("nan")
    a = np.array([[1.0], [5.0], [nan]])              # a column: one value per row
    b = np.array([[1.0, 0.5, nan]])                  # a row: one value per column
    c = np.array([[2.0, 0.5, 0.0], [4.0, 5.0, 6.0], [0.0, nan, 1.0]])
    idx, best = derive.choose({"a": a, "b": b, "c": c})
    # row 0: a = 1 against (1, 0.5, nan) and (2, 0.5, 0): tie → a; 0.5 < 1 → b (c's tie loses); b's NaN
    # row 1: a = 5 against (1, 0.5, nan) and (4, 5, 6): b, b, b's NaN
    # row 2: a is NaN: the first option, a NaN, wins every column
    assert idx.tolist() == [[0, 1, 1], [1, 1, 1], [0, 0, 0]]
    assert best.shape == (3, 3)
    assert best[:2, :2].tolist() == [[1.0, 0.5], [1.0, 0.5]] and np.isnan(best[:, 2]).all()
    assert np.isnan(best[2]).all()
    stacked = np.stack(np.broadcast_arrays(a, b, c))
    assert idx.tolist() == np.argmin(stacked, axis=0).tolist()


@pytest.mark.parametrize("fn,arg", [
    (derive.log2, 8.0), (derive.log2, 6.0), (derive.ceil, 2.5), (derive.floor, 2.5), (derive.sqrt, 2.0),
])
def test_unary_ops_keep_their_mode_and_agree(fn, arg):
    f = fn(arg)
    a = fn(np.array([arg]))
    v = fn(leaf("x", arg))
    assert type(f) is float
    assert isinstance(a, np.ndarray)
    assert isinstance(v, Value)
    assert f == a[0] == v.value


def test_log2_is_exact_on_powers_of_two():
    for k in range(60):
        assert derive.log2(2.0**k) == k
        assert derive.ceil(derive.log2(2**k)) == k


def test_binary_ops_keep_python_floats():
    assert type(derive.maximum(1, 2)) is float and derive.maximum(1, 2) == 2.0
    assert type(derive.minimum(1.5, 2)) is float and derive.minimum(1.5, 2) == 1.5
    assert type(derive.where(True, 1, 2)) is float
    assert derive.where(np.array([True, False]), 1.0, 2.0).tolist() == [1.0, 2.0]


def test_constant_is_free_in_float_mode():
    assert derive.constant(math.log(2), "ln 2", 1.0) == math.log(2)
    w = leaf("W", 1.0, INFORMATION)
    assert derive.formula(w * derive.constant(math.log(2), "ln 2", w)) == "W·ln 2"
    assert [s.name for s in steps(named("y", w * derive.constant(math.log(2), "ln 2", w)))] == ["W", "y"]


def test_different_values_sharing_a_name_get_primes():
    alpha = leaf("α", 2e-6, TIME)
    h8 = named("hops", 2 * (leaf("P", 8) - 1))
    h16 = named("hops", 2 * (leaf("P", 16) - 1))
    t8, t16 = named("T", alpha * h8), named("T", alpha * h16)
    lines = to_text(steps(t8, t16)).splitlines()
    assert lines == [
        "α = 2 µs",
        "P = 8",
        "hops = 2·(P − 1) = 2 × (8 − 1) = 14",
        "T = α·hops = 2 µs × 14 = 28 µs",
        "P′ = 16",
        "hops′ = 2·(P′ − 1) = 2 × (16 − 1) = 30",
        "T′ = α·hops′ = 2 µs × 30 = 60 µs",
    ]
    # Outside a derivation the names are untouched.
    assert derive.formula(t16) == "α·hops"


def test_the_same_input_built_twice_is_listed_once():
    a1 = leaf("α", 2e-6, TIME, source="spec sheet")
    a2 = leaf("α", 2e-6, TIME, source="spec sheet")
    t = named("T", a1 * 3 + a2 * 4)
    got = steps(t)
    assert [s.name for s in got] == ["α", "T"]
    assert got[-1].formula == "α·3 + α·4"


def test_percent_style():
    overlap = leaf("overlap", 0.9, DIMENSIONLESS, style="percent")
    exposed = named("exposed", leaf("T_comm", 50e-3, TIME) * (1 - overlap))
    eta = named("η", leaf("T_c", 100e-3, TIME) / (leaf("T_c", 100e-3, TIME) + exposed), style="percent")
    s = {x.name: x for x in steps(eta)}
    assert list(s) == ["T_c", "T_comm", "overlap", "exposed", "η"]
    assert s["overlap"].result == "90 %"
    assert s["exposed"].substituted == "50 ms × (1 − 90 %)"
    # 100 / (100 + 50 × 0.1) = 95.24 %
    assert s["η"].formula == "T_c/(T_c + exposed)"
    assert s["η"].result == "95.2 %"


def test_long_sums_do_not_exhaust_the_stack_when_ordered():
    terms = [named(f"t{i}", leaf(f"x{i}", float(i), TIME) * 2) for i in range(400)]
    total = named("total", sum(terms))
    got = steps(total)
    assert len(got) == 801  # 400 inputs, 400 steps, the total
    assert got[-1].value == sum(2.0 * i for i in range(400))


def test_docstring_examples_hold():
    import doctest

    from ccost.model import costs

    for module in (derive, costs):
        result = doctest.testmod(module)
        assert result.attempted > 0 and result.failed == 0, module.__name__
