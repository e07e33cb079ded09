"""The validation set (bench/validation/rows.yaml), predicted from the bundled library with one set of
defaults (a plan names the engine or framework it runs, nothing else), held to the issues' tolerances.

Training (framework profiles fitted by bench/fit_train_stack.py): each development row within
25 %, every row within 1.5x, median factor <= 1.25, the Megatron rows ranked like the measurements (Spearman
>= 0.6), llm-foundry's A100 model sizes ranked by MFU (Spearman >= 0.8), and every layout that ran fits.
Inference (engine profiles fitted by bench/fit_stack.py over all 75 rows): each development
row within 25 %, no row off by 1.6x, median factor <= 1.15, the decode ratio flat in size (no sign change
between 8 B and 70 B), and the V9 TP sweep's fixed part a (latency = a + b/TP) within 30 % of the measured
7.0 ms. The hold-outs (bench/validate.py without --no-holdout) refit every profile and take minutes: they
are the bench's, not a test's."""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

import validate  # noqa: E402


@pytest.fixture(scope="module")
def all_rows():
    return validate.predict()


@pytest.fixture(scope="module")
def training_rows(all_rows):
    return [r for r in all_rows if r.metric.startswith("train")]


def test_each_training_row_within_25_percent(training_rows):
    dev = [r for r in training_rows if r.set == "development"]
    assert len(dev) == 11 and len(training_rows) == 27
    off = {r.id: round(r.ratio, 3) for r in dev if r.factor > 1.25}
    assert off == {}


def test_training_median_and_worst(training_rows):
    factors = [r.factor for r in training_rows]
    assert statistics.median(factors) <= 1.25
    assert max(factors) <= 1.5


def test_every_training_layout_that_ran_fits_memory(training_rows):
    # the rows ran on their GPUs: ccost's memory per GPU (policy: the whole HBM) must admit each
    assert [r.id for r in training_rows if not r.fits_memory] == []


def test_llmfoundry_a100_sizes_ranked_by_mfu(training_rows):
    lf = [r for r in training_rows if r.stack == "llmfoundry" and r.gpu == "a100"]
    assert len(lf) == 9
    assert validate.spearman([r.measured_mfu for r in lf], [r.predicted_mfu for r in lf]) >= 0.8


def test_megatron_ranking(training_rows):
    meg = [r for r in training_rows if r.stack == "megatron"]
    assert len(meg) == 9
    assert validate.spearman([r.measured for r in meg], [r.predicted for r in meg]) >= 0.6


@pytest.fixture(scope="module")
def inference_rows(all_rows):
    return [r for r in all_rows if r.metric in ("decode_step", "prefill")]


def test_each_inference_row_within_25_percent(inference_rows):
    assert len(inference_rows) == 13
    off = {r.id: round(r.ratio, 3) for r in inference_rows if r.factor > 1.25}
    assert off == {}


def test_inference_median_and_worst(all_rows):
    rows = [r for r in all_rows if r.family == "inference"]
    assert len(rows) == 75
    factors = [r.factor for r in rows]
    assert statistics.median(factors) <= 1.15
    assert max(factors) <= 1.6


def test_the_decode_ratio_is_flat_in_model_size(all_rows):
    t = validate.summary(all_rows)["trend"]["decode (TPOT rows)"]
    assert not t["sign_change"] and abs(t["slope"]) < 0.05, t


def _a_plus_b_over_tp(tps, ys):
    """Least squares of y = a + b·x with x = 1/TP: b = Sxy/Sxx, a = ȳ − b·x̄."""
    xs = [1 / t for t in tps]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return my - b * mx, b


def test_v9_tp_sweep_fixed_part_within_30_percent_of_the_measured_7_ms(inference_rows):
    # By hand from the published TPOTs 32.09, 19.74, 13.12, 10.20 ms at TP 1, 2, 4, 8: x = 1/TP has mean
    # 0.46875, y mean 18.7875 ms; Sxx = 0.449219, Sxy = 11.28844 ms → b = 25.13 ms, a = 18.7875 − 25.13 ×
    # 0.46875 = 7.01 ms (the row's source: "a = 7.0 ms measured").
    a_meas, b_meas = _a_plus_b_over_tp([1, 2, 4, 8], [32.09, 19.74, 13.12, 10.20])
    assert a_meas == pytest.approx(7.01, abs=0.01) and b_meas == pytest.approx(25.13, abs=0.01)
    v9 = {r.id: r.predicted * 1e3 for r in inference_rows if r.id.startswith("V9-")}
    a, _ = _a_plus_b_over_tp([1, 2, 4, 8], [v9["V9-1"], v9["V9-2"], v9["V9-3"], v9["V9-4"]])
    assert abs(a / 7.0 - 1) <= 0.30, a


def _std_stacks():
    from ccost import check

    return check.load_spec(str(REPO / "specs" / "std" / "stacks.ccost"))[0].stacks


def test_serving_profiles_share_the_gpu_terms_and_the_default_is_current_vllm():
    # bench/fit_stack.py fits the GPU's per-layer time once for every engine, host terms per engine and
    # design; current vLLM (and so serving_default) is V1's host terms with the host behind the GPU; every
    # profile prices the GPU's work on the curves measured under its engine
    import fit_stack

    stacks = _std_stacks()
    fitted = [stacks[s] for s in (*fit_stack.HOST, *fit_stack.DERIVED)]
    for f in fit_stack.SHARED:
        assert len({getattr(s, f) for s in fitted}) == 1, f
    for f in fit_stack.HOST_FIELDS:
        assert getattr(stacks["vllm"], f) == getattr(stacks["vllm_v1"], f)
        assert getattr(stacks["serving_default"], f) == getattr(stacks["vllm"], f)
    overlap = {s: stacks[s].host_overlap for s in ("vllm", "vllm_v1", "vllm_v0", "sglang", "trtllm")}
    assert overlap == {"vllm": True, "vllm_v1": False, "vllm_v0": False, "sglang": True, "trtllm": True}
    assert all(s.rates == "kernels" and s.engine in ("vllm", "sglang", "trtllm") for s in fitted)


def test_training_profiles_price_on_the_curves_with_one_elementwise_share():
    import fit_train_stack

    stacks = _std_stacks()
    profiles = [stacks[s] for s in (*fit_train_stack.FRAMEWORKS.values(), *fit_train_stack.DERIVED)]
    assert all(s.rates == "kernels" for s in profiles)
    assert len({s.elementwise_efficiency for s in profiles}) == 1
    assert stacks["training_default"].framework_efficiency == stacks["megatron_core"].framework_efficiency
    # on GPUs without curves: the framework's share of the H100 BF16 curve's plateau (85 %), whole per cent
    for s in profiles:
        assert s.gemm_efficiency == pytest.approx(round(s.framework_efficiency * 0.85, 2)), s.name


@pytest.mark.slow  # the joint fit reprices the 27 training rows many times
def test_training_profiles_are_what_fit_train_stack_prints():
    import fit_train_stack

    th = fit_train_stack.fit_theta([r for r in validate.load_rows() if fit_train_stack.uses(r)])
    want = {s: fit_train_stack.rounded(v) for s, v in fit_train_stack._overrides(th).items()}
    stacks = _std_stacks()
    for s, v in want.items():
        assert {f: getattr(stacks[s], f) for f in v} == pytest.approx(v, abs=1e-9), s


@pytest.mark.slow  # the joint fit over 75 rows: ~17 s (each Jacobian column re-prices only the rows it reaches)
def test_serving_profiles_are_what_fit_stack_prints():
    import fit_stack

    th, groups = fit_stack.fit_theta([r for r in validate.load_rows() if fit_stack.uses(r)])
    want = {s: fit_stack.rounded(v) for s, v in fit_stack._overrides(th, groups).items()}
    stacks = _std_stacks()
    for s, v in want.items():
        assert {f: getattr(stacks[s], f) for f in v} == pytest.approx(v, rel=1e-9, abs=1e-12), s


def test_spearman_by_hand():
    # ranks 1..4 against 1..4 reversed: d² = 9 + 1 + 1 + 9 = 20; 1 − 6·20/(4·15) = −1
    assert validate.spearman([1, 2, 3, 4], [4, 3, 2, 1]) == -1.0
    assert validate.spearman([1, 2, 3], [10, 20, 30]) == 1.0


def test_the_size_trend_is_a_least_squares_line_in_log_log():
    # By hand: ratios 2 at 8e9 and 1 at 64e9 (three octaves) -> slope log(1/2)/log(8) = -1/3 exactly; at 8 B
    # the line gives 2 and at 70 B 2·(70/8)^(-1/3) = 0.9869: one above 1, one below, a sign change.
    rows = [validate.Row("a", "e", "p", "decode_step", 1.0, 2.0, "", "", params=8e9),
            validate.Row("b", "e", "p", "decode_step", 1.0, 1.0, "", "", params=64e9)]
    t = validate.trend(rows)
    assert t["slope"] == pytest.approx(-1 / 3)
    assert t["ratio_at"]["8B"] == pytest.approx(2.0)
    assert t["ratio_at"]["70B"] == pytest.approx(2 * (70 / 8) ** (-1 / 3))
    assert t["sign_change"]


def test_every_added_row_names_its_source_and_a_known_engine():
    import yaml

    data = yaml.safe_load(validate.ROWS.read_text(encoding="utf-8"))
    for r in data["rows"]:
        assert r["set"] in ("development", "added"), r["id"]
        assert (r.get("source") or r["id"].split("-")[0]) in data["sources"], r["id"]
        assert r["set"] == "development" or r.get("source"), r["id"]  # an added row names its source tag
        assert r["stack"] in ("vllm", "sglang", "trtllm", "megatron", "torchtitan", "llmfoundry"), r["id"]
