"""The bundled std library against its sources (docs/sources.md), and every spec in specs/ checks clean.

Why: the std library is what users import instead of typing spec-sheet numbers; a slipped digit there
silently skews every review built on it. So every expected value below is typed from
the sources themselves (with the source tag in a comment; the tags are listed in docs/sources.md) or worked out by hand here,
never read back from the .ccost files. Units: the checked spec holds SI floats (bytes, B/s, FLOP/s, s).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from ccost.check import check_file, load_spec
from ccost.resources import resource_dir

REPO = Path(__file__).resolve().parent.parent
SPECS = REPO / "specs"
STD = resource_dir("std")

GB = 1e9
GiB = 2**30
TB = 1e12
TFLOPS = 1e12
US = 1e-6


def _load(name: str):
    spec, _warnings = load_spec(str(STD / name))
    return spec


@pytest.fixture(scope="module")
def gpus():
    return _load("gpus.ccost").gpus


@pytest.fixture(scope="module")
def links():
    return _load("links.ccost").links


@pytest.fixture(scope="module")
def models():
    return _load("models.ccost").models


@pytest.fixture(scope="module")
def clusters():
    return _load("clusters.ccost").clusters


def close(actual: float, expected: float, rel: float = 1e-9) -> bool:
    return math.isclose(actual, expected, rel_tol=rel)


# --- GPUs (catalog section 1) ------------------------------------------------------------------------

# name: (memory bytes, memory bandwidth B/s, dense BF16 FLOP/s), typed from the catalog.
GPU_FACTS = {
    "a100": (80 * GB, 2039 * GB, 312 * TFLOPS),          # [KA100]
    "h100": (80 * GB, 3.35 * TB, 989.4 * TFLOPS),        # [KH100]
    "h100_pcie": (80 * GB, 2000 * GB, 756 * TFLOPS),     # [GB-PCIe], [H100PCIe-PB] ">2,000 GB/s", [TT-util]
    "h200": (141 * GB, 4.8 * TB, 989.4 * TFLOPS),        # [LZ, SAUL, AIWIKI-H200], [MI-vs-H200]
    "b200": (1440 * GB / 8, 8 * TB, 2250 * TFLOPS),      # DGX B200 1,440 GB / 8 [DGXB200]; [KB200]
    "mi300x": (192 * GiB, 5.3 * TB, 1307.4 * TFLOPS),    # [ROCM-SPECS] "VRAM (GiB) 192"; [ROCM-MI300]
    "l40s": (48 * GB, 864 * GB, 362.05 * TFLOPS),        # [L40S-DS]
}

# FP8 variants: the dense FP8 peak, everything else as the BF16 entry.
FP8_FLOPS = {
    "h100_fp8": ("h100", 1978.9 * TFLOPS),     # [KH100]; 3,958 is the sparse figure
    "h200_fp8": ("h200", 1978.9 * TFLOPS),     # [MI-vs-H200]
    "b200_fp8": ("b200", 4500 * TFLOPS),       # [KB200]
    "gb200_fp8": ("gb200", 5000 * TFLOPS),     # [KB200]
    "mi300x_fp8": ("mi300x", 2614.9 * TFLOPS),  # [ROCM-MI300]
    "l40s_fp8": ("l40s", 733 * TFLOPS),        # [L40S-DS]
}


@pytest.mark.parametrize("name", sorted(GPU_FACTS))
def test_gpu_numbers_match_the_catalog(gpus, name):
    memory, hbm, flops = GPU_FACTS[name]
    g = gpus[name]
    assert close(g.memory, memory), (name, g.memory)
    assert close(g.hbm_bandwidth, hbm), (name, g.hbm_bandwidth)
    assert close(g.flops, flops), (name, g.flops)


def test_gb200_memory_is_the_rack_total_over_72(gpus):
    # Catalog: "~186 GB derived from NVIDIA's 'about 13.4 TB' per 72-GPU rack"; 13.4e12 / 72 = 186.1e9.
    # The library rounds to whole GB; conflicting sources say 187.5 GB or 192 GB, so 186 is the low end.
    g = gpus["gb200"]
    assert abs(g.memory - 13.4 * TB / 72) < 0.5 * GB
    assert close(g.hbm_bandwidth, 8 * TB)
    assert close(g.flops, 2500 * TFLOPS)


@pytest.mark.parametrize("name", sorted(FP8_FLOPS))
def test_fp8_variants_change_only_flops(gpus, name):
    base_name, fp8 = FP8_FLOPS[name]
    g, base = gpus[name], gpus[base_name]
    assert close(g.flops, fp8)
    assert g.memory == base.memory and g.hbm_bandwidth == base.hbm_bandwidth


def test_no_fp8_entry_where_the_catalog_has_none(gpus):
    # A100: no FP8 on Ampere; H100 PCIe: FP8 dense unsourced.
    assert "a100_fp8" not in gpus and "h100_pcie_fp8" not in gpus


def test_std_gpus_carry_a_source_and_no_invented_achieved_flops(gpus):
    # No source in the catalog gives an achieved (measured) FLOP/s: the library must not invent one.
    for name, g in gpus.items():
        assert g.achieved_flops is None, name
        assert g.source, name


# Money and power of every GPU (H200 and B200 once had neither), typed from the sources named
# (docs/sources.md): price per GPU-hour in USD/h and power in W.
HOUR = 3600.0
GPU_MONEY_POWER = {
    "a100": (2.4984, 400),     # Modal A100 80GB [LAMBDA-LIST]; TDP [LAMBDA-TCO]
    "h100": (3.78, 700),       # Lambda 1x H100 SXM [LAMBDA-LIST]; [TDP-H100]
    "h100_pcie": (2.86, 350),  # Lambda 1x H100 PCIe [LAMBDA-LIST]; [H100PCIe-PB]
    "h200": (4.54, 700),       # Spheron H200 SXM [SPHERON-PRICE]; TGP 700 W SXM [SAUL], [LZ]
    "b200": (6.03, 1000),      # Spheron B200 SXM [SPHERON-PRICE]; HGX B200 [KB200]
    "gb200": (9.08 / 2, 1200),  # Spheron 9.08 USD/h per Superchip of two GPUs [SPHERON-PRICE]; [KB200]
    "mi300x": (1.85, 750),     # Vultr [GB-MI300X]; TDP [GB-MI300X]
    "l40s": (1.9512, 350),     # Modal L40S [LAMBDA-LIST]; [L40S-TDP]
}


@pytest.mark.parametrize("name", sorted(GPU_MONEY_POWER))
def test_every_std_gpu_has_a_sourced_price_and_power(gpus, name):
    price, watts = GPU_MONEY_POWER[name]
    g = gpus[name]
    assert close(g.price_per_hour * HOUR, price) and close(g.power, watts), (name, g.price_per_hour, g.power)


def test_the_money_and_power_table_covers_every_std_gpu_and_each_value_has_a_source(gpus):
    # every GPU (an FP8 variant inherits its base's figures) is in the table above
    assert {n for n in gpus if n not in FP8_FLOPS} == set(GPU_MONEY_POWER)
    assert all(gpus[n].price_per_hour is not None and gpus[n].power is not None for n in gpus)
    # each `price_per_hour` and `power` line of the library cites a source tag
    text = (STD / "gpus.ccost").read_text(encoding="utf-8")
    lines = [ln for ln in text.splitlines() if ln.strip().startswith(("price_per_hour", "power"))]
    assert len(lines) == 2 * len(GPU_MONEY_POWER)
    assert all("[" in ln.split("#", 1)[1] for ln in lines if "#" in ln) and all("#" in ln for ln in lines)


# --- links (catalog section 2; per GPU, per direction) -----------------------------------------------

LINK_BANDWIDTH = {
    "nvlink3": 600 * GB / 2,              # 600 GB/s bidir [KA100]
    "nvlink4": 900 * GB / 2,              # 900 GB/s bidir [KH100]; 450 per dir [NCCL-212]
    "nvlink5": 1.8 * TB / 2,              # 1.8 TB/s bidir [NVL-PAGE]
    "pcie4": 31.5 * GB,                   # [PCIE-TBL]
    "pcie5": 63.0 * GB,                   # [PCIE-TBL]
    "ib_hdr": 200e9 / 8,                  # 200 Gb/s per port [NV-NDR]
    "ib_ndr": 400e9 / 8,                  # 400 Gb/s [NV-NDR, CX7]
    "ib_xdr": 800e9 / 8,                  # 800 Gb/s [QX800]
    "roce_400g": 400e9 / 8,               # 400 GbE [L3-SUMMARY]
    "infinity_fabric": 7 * 128 * GB / 2,  # 7 links x 128 GB/s bidir [ROCM-MI300, WHEELER]
}


@pytest.mark.parametrize("name", sorted(LINK_BANDWIDTH))
def test_link_bandwidth_is_per_direction(links, name):
    assert close(links[name].bandwidth, LINK_BANDWIDTH[name]), (name, links[name].bandwidth)


def test_headline_link_numbers(links):
    assert close(links["nvlink4"].bandwidth, 4.5e11)
    assert close(links["ib_ndr"].bandwidth, 5e10)


def test_alphas_follow_the_notes(links):
    # "Communication Cost Math — Distributed Inference" §1: "NVLink ~2 us, PCIe ~7 us, IB ~3 us"; one-shot AllReduce "~8 us".
    for name in ("nvlink3", "nvlink4", "nvlink5"):
        assert close(links[name].alpha, 2 * US), name
        assert close(links[name].one_shot, 8 * US), name
    for name in ("pcie4", "pcie5"):
        assert close(links[name].alpha, 7 * US), name
    for name in ("ib_hdr", "ib_ndr", "ib_xdr"):
        assert close(links[name].alpha, 3 * US), name


def test_std_links_are_spec_sheet_not_measured(links):
    # Checklist item 3 asks whether alpha and beta are measured: nothing in the library is.
    for name, link in links.items():
        assert link.source and link.source.startswith("spec sheet"), name
        assert not link.measured, name
        assert link.efficiency == 1.0, name


# --- models (catalog section 3) ----------------------------------------------------------------------

# name: (layers, hidden, heads, kv_heads, ffn, vocab)
MODEL_SHAPES = {
    "llama3_8b": (32, 4096, 32, 8, 14336, 128256),
    "llama3_70b": (80, 8192, 64, 8, 28672, 128256),
    "llama31_405b": (126, 16384, 128, 8, 53248, 128256),
    "mixtral_8x7b": (32, 4096, 32, 8, 14336, 32000),
    "qwen25_72b": (80, 8192, 64, 8, 29568, 152064),
    "gpt3_175b": (96, 12288, 96, 96, 49152, 50257),
}


@pytest.mark.parametrize("name", sorted(MODEL_SHAPES))
def test_model_shapes_match_the_catalog(models, name):
    m = models[name]
    assert (m.layers, m.hidden, m.heads, m.kv_heads, m.ffn, m.vocab) == MODEL_SHAPES[name]


def _llama_params(layers: int, d: int, heads: int, kv: int, ffn: int, vocab: int) -> int:
    """The catalog's "(calc)" rule: untied embeddings, GQA attention, SwiGLU MLP, RMSNorm weights."""
    head_dim = d // heads
    per_layer = 2 * d * d + 2 * d * kv * head_dim + 3 * d * ffn + 2 * d
    return 2 * vocab * d + layers * per_layer + d


@pytest.mark.parametrize("name,catalog_params", [
    ("llama3_8b", 8.03e9), ("llama3_70b", 70.55e9), ("llama31_405b", 405.85e9),
])
def test_llama_params_are_the_catalog_calc(models, name, catalog_params):
    m = models[name]
    calc = _llama_params(*MODEL_SHAPES[name])
    assert m.params == calc
    assert abs(calc - catalog_params) < 0.005e9  # the catalog prints two decimals of billions


def test_llama3_70b_headline(models):
    m = models["llama3_70b"]
    assert (m.layers, m.hidden, m.kv_heads) == (80, 8192, 8)
    assert m.weights == "bf16"
    assert abs(m.total_weight_bytes - 141.1e9) < 0.05e9  # 70.55e9 x 2 B


def test_mixtral(models):
    m = models["mixtral_8x7b"]
    assert (m.experts, m.top_k, m.moe_layers) == (8, 2, 32)
    assert abs(m.params - 46.70e9) < 0.005e9          # (calc); paper "47B"
    assert abs(m.active_params - 12.88e9) < 0.005e9   # (calc); paper "13B"


def test_deepseek_v3(models):
    m = models["deepseek_v3"]
    assert (m.layers, m.hidden, m.heads, m.ffn, m.vocab) == (61, 7168, 128, 18432, 129280)
    assert (m.experts, m.top_k, m.moe_layers) == (256, 8, 58)  # 61 layers - 3 dense
    assert m.params == 671e9 and m.active_params == 37e9        # README
    assert m.kv_heads is None                                    # MLA: no per-head KV cache
    assert m.weights == "fp8"                                    # config dtype


def test_qwen_params_equal_the_weight_dump(models):
    assert models["qwen25_72b"].params == 72_706_203_648


def test_gpt3(models):
    assert models["gpt3_175b"].params == 175.0e9


def test_std_models_carry_a_source(models):
    for name, m in models.items():
        assert m.source, name


# --- clusters ---------------------------------------------------------------------------------------

def test_clusters(clusters):
    hgx = clusters["hgx_h100"]
    assert hgx.gpus == 8 and hgx.domain == 8
    assert hgx.gpu.name == "h100" and close(hgx.intra_node.bandwidth, 450 * GB)

    two = clusters["hgx_h100_2node"]
    assert two.gpus == 16 and close(two.inter_node.bandwidth, 50 * GB)

    assert clusters["dgx_a100"].gpu.name == "a100"
    assert clusters["dgx_a100"].intra_node.name == "nvlink3"

    nvl72 = clusters["nvl72"]
    assert nvl72.gpus == 72 and nvl72.domain == 72
    assert nvl72.gpu.name == "gb200" and nvl72.intra_node.name == "nvlink5"

    assert clusters["mi300x_node"].intra_node.name == "infinity_fabric"


# --- the worked-example specs carry the notes' inputs, not the library's ------------------------------

def test_example_specs_use_the_notes_numbers():
    a1, _ = load_spec(str(SPECS / "a1-tp-decode.ccost"))
    link = a1.links["nvlink4"]
    assert (link.alpha, link.bandwidth, link.one_shot) == (2 * US, 450 * GB, 8 * US)
    assert a1.models["llama3_70b"].total_weight_bytes == 141 * GB  # the notes' W
    assert {"tp8", "tp8_tree", "tp8_one_shot"} <= set(a1.plans)
    assert [p.allreduce for p in a1.compares["algorithms"].plans] == ["ring", "tree", "one_shot"]

    a3, _ = load_spec(str(SPECS / "a3-multi-node.ccost"))
    m = a3.models["llama31_405b"]
    assert (m.layers, m.hidden, m.params, m.weights, m.activations) == (126, 16384, 405e9, "fp8", "bf16")
    assert a3.plans["tp16"].cross_node == "flat" and a3.plans["tp16_hier"].cross_node == "hierarchical"
    b = a3.plans["tp8_pp2"]
    assert (b.tp, b.pp, b.microbatches, b.batch) == (8, 2, 32, 32)
    assert a3.compares["cross_node"].by == "overhead"
    assert close(a3.clusters["two_nodes"].inter_node.alpha, 3 * US)

    a4, _ = load_spec(str(SPECS / "a4-tp-scaling.ccost"))
    sweep = a4.sweeps["tp_scaling"]
    assert sweep.fields == (("tp", (1, 2, 4, 8, 16, 32, 64)),)
    assert sweep.base.allreduce == "tree" and sweep.base.cluster.domain == 64

    b_spec, _ = load_spec(str(SPECS / "b-collectives.ccost"))
    assert b_spec.plans["moe_a2a"].model.top_k == 1        # the note charges one copy of each token
    assert b_spec.plans["ddp_7b_8nodes"].cross_node == "flat"
    assert b_spec.plans["ddp_7b_8nodes"].gpus == 64

    eff, _ = load_spec(str(SPECS / "b-efficiency.ccost"))
    # bandwidth chosen so that 2 x 7/8 x 14 GB moves in 50 ms
    assert close(eff.links["ar50"].bandwidth, 2 * 7 / 8 * 14 * GB / 0.050)


# --- every spec checks clean ---------------------------------------------------------------------------

ALL_SPECS = sorted(SPECS.rglob("*.ccost"))  # specs/, specs/std/, specs/measured/


def test_there_are_specs():
    names = {p.name for p in ALL_SPECS}
    assert {"a1-tp-decode.ccost", "a2-tp-prefill.ccost", "a3-multi-node.ccost", "a4-tp-scaling.ccost",
            "b-collectives.ccost", "gpus.ccost", "links.ccost", "models.ccost", "clusters.ccost"} <= names


@pytest.mark.parametrize("path", ALL_SPECS, ids=lambda p: str(p.relative_to(SPECS)))
def test_spec_checks_clean(path):
    result = check_file(str(path))
    errors = [d for d in result.diagnostics if d.is_error]
    assert not errors, "\n".join(f"{d.span}: {d.code}: {d.message}" for d in errors)
    assert result.spec is not None
