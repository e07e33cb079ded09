"""The resolver and checker: values in SI floats (hand arithmetic in the comments), references, imports,
extends, topology checks, and that every example spec and std file checks clean."""

from __future__ import annotations

from dataclasses import FrozenInstanceError
from pathlib import Path

import pytest
from ccost import cli
from ccost.check import check_file, check_text, load_spec
from ccost.diagnostics import CcostError
from ccost.resources import resource_dir

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((REPO / "specs").glob("*.ccost"))
STD = sorted(resource_dir("std").glob("*.ccost"))

# A complete spec: Llama-3-70B decode at TP=8 on one node, verbatim.
LANGUAGE_EXAMPLE = '''
link nvlink4 "NVLink 4 through NVSwitch" {
  alpha     = 2 us                  # per hop
  bandwidth = 450 GB/s              # per GPU, per direction
  source    = "spec sheet"
}

gpu h100 "H100 SXM 80GB" {
  memory         = 80 GB
  hbm_bandwidth  = 3.35 TB/s
  flops          = 989 TFLOP/s      # dense BF16 peak
  achieved_flops = 600 TFLOP/s
}

cluster hgx { gpu = h100; nodes = 1; gpus_per_node = 8; intra_node = nvlink4 }

model llama3_70b "Llama-3-70B" {
  layers = 80; hidden = 8192; heads = 64; kv_heads = 8
  params = 70.6e9                   # 141.2 GB of BF16 weights; the notes round to 141 GB
  weights = bf16; activations = bf16
}

plan tp8 "TP=8 decode, batch 32" {
  model = llama3_70b; cluster = hgx
  phase = decode; batch = 32
  tp = 8
  allreduce = ring
}

plan tp8_tree extends tp8 { allreduce = tree }

sweep tp_scaling "When does TP stop helping?" {
  base = tp8_tree
  tp   = [1, 2, 4, 8, 16, 32, 64]
}

policy { max_overhead = 30 %; min_efficiency = 70 % }
'''

BASE = '''
link nv { alpha = 2 us; bandwidth = 450 GB/s }
link ib { alpha = 3 us; bandwidth = 50 GB/s; source = "spec sheet" }
gpu h100 { memory = 80 GB; hbm_bandwidth = 3.35 TB/s; flops = 989 TFLOP/s }
cluster hgx { gpu = h100; intra_node = nv }
cluster two { gpu = h100; nodes = 2; intra_node = nv; inter_node = ib }
model m70 { layers = 80; hidden = 8192; kv_heads = 8; params = 70.6e9 }
'''


def ok(text: str, path: str = "t.ccost"):
    r = check_text(text, path)
    assert r.errors == [], "\n".join(f"{d.span}: {d.code} {d.message}" for d in r.errors)
    assert r.spec is not None
    return r.spec


def codes(text: str, path: str = "t.ccost") -> list[str]:
    return [d.code for d in check_text(text, path).diagnostics]


def only(text: str, code: str):
    r = check_text(text, "t.ccost")
    assert [d.code for d in r.diagnostics] == [code], [(d.code, d.message) for d in r.diagnostics]
    return r.diagnostics[0]


# --- the language example, value by value ------------------------------------------------------------

def test_language_example_values():
    s = ok(LANGUAGE_EXAMPLE)
    nv = s.links["nvlink4"]
    assert nv.alpha == pytest.approx(2e-6)            # 2 us
    assert nv.bandwidth == pytest.approx(450e9)       # 450 GB/s, decimal
    assert nv.one_shot_latency is None and nv.one_shot == pytest.approx(2e-6)  # default: alpha
    assert nv.efficiency == 1.0 and nv.source == "spec sheet"
    g = s.gpus["h100"]
    assert (g.memory, g.hbm_bandwidth) == (pytest.approx(80e9), pytest.approx(3.35e12))
    assert (g.flops, g.achieved_flops) == (pytest.approx(989e12), pytest.approx(600e12))
    c = s.clusters["hgx"]
    assert c.gpu is g and c.intra_node is nv and c.inter_node is None and c.gpus == 8 and c.domain == 8
    m = s.models["llama3_70b"]
    assert (m.layers, m.hidden, m.heads, m.kv_heads) == (80, 8192, 64, 8)
    assert isinstance(m.layers, int)
    assert m.total_weight_bytes == pytest.approx(141.2e9)  # 70.6e9 x 2 bytes
    p = s.plans["tp8"]
    assert (p.model, p.cluster, p.phase, p.batch, p.tp, p.allreduce) == (m, c, "decode", 32, 8, "ring")
    assert (p.pp, p.ep, p.dp, p.microbatches, p.overlap, p.cross_node, p.fsdp) == (1, 1, 1, 1, 0.0, "auto", False)
    assert p.gpus == 8 and p.title == "TP=8 decode, batch 32"
    t = s.plans["tp8_tree"]
    assert t.allreduce == "tree" and (t.tp, t.batch, t.phase) == (8, 32, "decode") and t.title is None
    sw = s.sweeps["tp_scaling"]
    assert sw.base is t and sw.fields == (("tp", (1, 2, 4, 8, 16, 32, 64)),)
    assert (s.policy.max_overhead, s.policy.min_efficiency, s.policy.max_memory) == (
        pytest.approx(0.3), pytest.approx(0.7), pytest.approx(0.9))
    assert s.local_plans == ("tp8", "tp8_tree")
    assert s.files == ("t.ccost",)
    # sweeps pass the cluster check: A4 sweeps TP to 64 on this 8-GPU node (the notes ignore the cluster)


def test_entities_are_frozen_and_carry_spans():
    s = ok(LANGUAGE_EXAMPLE)
    p = s.plans["tp8"]
    with pytest.raises(FrozenInstanceError):
        p.tp = 4  # type: ignore[misc]
    assert (p.span.line, p.span.column) == (23, 6)  # the name in `plan tp8 ...` (line 1 is empty)
    assert (p.spans["tp"].line, p.spans["tp"].column) == (26, 8)
    assert s.plans["tp8_tree"].spans["tp"] == p.spans["tp"]  # inherited: where it was written


# --- expressions and units -------------------------------------------------------------------------------

def test_units_and_unit_algebra():
    s = ok(BASE + '''
link a { alpha = 1 GB / (500 GB/s); bandwidth = 400 Gbit/s; one_shot_latency = 8 µs; efficiency = 82 % }
link b { alpha = 0.5 * (2 us + 3000 ns); bandwidth = 1 GiB / 1 ms }
gpu g { memory = h100.memory * 0.9; hbm_bandwidth = 3 TB/s; flops = 1 PFLOP / 1 s; achieved_flops = 500 TFLOPS }
''')
    a, b, g = s.links["a"], s.links["b"], s.gpus["g"]
    assert a.alpha == pytest.approx(2e-3)              # 1e9 B / 5e11 B/s = 2 ms
    assert a.bandwidth == pytest.approx(50e9)          # 400e9 bit/s / 8 = 50 GB/s
    assert a.one_shot_latency == pytest.approx(8e-6)
    assert a.efficiency == pytest.approx(0.82)
    assert b.alpha == pytest.approx(2.5e-6)            # 0.5 x (2 us + 3 us)
    assert b.bandwidth == pytest.approx(1024**3 / 1e-3)  # 1 GiB per ms = 1.073741824e12 B/s
    assert g.memory == pytest.approx(72e9)             # 80 GB x 0.9
    assert g.flops == pytest.approx(1e15)
    assert g.achieved_flops == pytest.approx(500e12)   # TFLOPS is TFLOP/s


def test_functions():
    s = ok(BASE + '''
model m { layers = max(40, 80); hidden = 2 * 4096; params = sqrt(4e18); kv_heads = ceil(7.2); heads = floor(64.9) }
plan p { model = m; cluster = hgx; phase = decode; tp = log2(256); batch = min(64, 32) }
''')
    m, p = s.models["m"], s.plans["p"]
    assert (m.layers, m.hidden, m.kv_heads, m.heads) == (80, 8192, 8, 64)
    assert m.params == pytest.approx(2e9)
    assert (p.tp, p.batch) == (8, 32)


def test_dotted_references_read_defaults_and_inherited_fields():
    s = ok(BASE + '''
link nv_slow extends nv { efficiency = 50 % }
link x { alpha = nv_slow.alpha * 2; bandwidth = nv_slow.bandwidth * nv_slow.efficiency; one_shot_latency = nv.one_shot_latency }
cluster c { gpu = hgx.gpu; intra_node = nv; nvlink_domain = hgx.nvlink_domain; nodes = two.nodes; inter_node = ib }
''')
    x, c = s.links["x"], s.clusters["c"]
    assert x.alpha == pytest.approx(4e-6)         # inherited 2 us x 2
    assert x.bandwidth == pytest.approx(225e9)    # 450 GB/s x 50 %
    assert x.one_shot_latency == pytest.approx(2e-6)  # nv's default, its alpha
    assert c.gpu is s.gpus["h100"] and c.nvlink_domain == 8 and c.nodes == 2  # gpus_per_node default 8


def test_message_shape_of_a_dimension_error():
    d = only('link l { alpha = 2; bandwidth = 450 GB/s }', "E201")
    assert d.message.startswith("`alpha` needs a time, like 2 us; got a plain number")
    assert d.help == "write the unit after the number: `alpha = 2 us`"
    d = only('link l { alpha = 2 us; bandwidth = 450 GB }', "E201")
    assert "needs a bandwidth" in d.message and "got an amount of information" in d.message
    assert d.help.endswith("`bandwidth = 450 GB/s`")


def test_unknown_unit_suggests():
    d = only('link l { alpha = 2 us; bandwidth = 450 GBps }', "E202")
    assert "`GBps`" in d.message and "`GB/s`" in d.help
    d = only('link l { alpha = 2 usec; bandwidth = 1 GB/s }', "E202")
    assert "`us`" in d.help


def test_bare_unit_gets_a_hint():
    d = only('link l { alpha = us; bandwidth = 1 GB/s }', "E201")
    assert "write a number before the unit" in d.help


@pytest.mark.parametrize("expr,code", [
    ("1 us / 0", "E203"), ("(1 us - 1 us) / (2 - 2)", "E203"), ("1e300 s * 1e300", "E203"),
    ("-2 us", "E203"), ("2 us + 1 GB", "E206"), ("nope(1 us)", "E111"), ("sqrt(-4) * 1 us", "E203"),
    ("min(1 us, 1 GB)", "E206"), ("log2(2 us)", "E206"), ('"2 us"', "E205"), ("[1 us]", "E205"),
    ("true", "E205"), ("nv", "E205"), ("ib.source", "E205"),
    ("nv.source", "E104"),  # not set, and no default
])
def test_bad_expressions(expr, code):
    assert codes(BASE + f"link l {{ alpha = {expr}; bandwidth = 1 GB/s }}") == [code]


# --- ranges, integers, enums --------------------------------------------------------------------------

@pytest.mark.parametrize("member,code", [
    ("tp = 0", "E203"), ("tp = 2.5", "E203"), ("pp = -1", "E203"), ("batch = 0", "E203"),
    ("overlap = 1.5", "E203"), ("overlap = -10 %", "E203"), ("microbatches = 0.5", "E203"),
    ("allreduce = riing", "E204"), ("cross_node = tiered", "E204"), ("phase = decode", "E102"),
    ("fsdp = 1", "E205"), ("tp = 1e30", "E203"), ("compute_time = 0 s", "E203"),
])
def test_plan_field_values(member, code):
    assert codes(BASE + f"plan p {{ model = m70; cluster = hgx; phase = decode; {member} }}") == [code]


def test_plan_enum_values_accepted():
    s = ok(BASE + '''plan p { model = m70; cluster = two; phase = prefill; seq = 2048; tp = 8; pp = 2
        allreduce = one_shot; cross_node = hierarchical; overlap = 0.25; fsdp = true; compute_time = 12 ms }''')
    p = s.plans["p"]
    assert (p.allreduce, p.cross_node, p.overlap, p.fsdp, p.seq) == ("one_shot", "hierarchical", 0.25, True, 2048)
    assert p.compute_time == pytest.approx(12e-3)


def test_whole_numbers_allow_float_spelling():
    s = ok(BASE + "plan p { model = m70; cluster = hgx; phase = decode; tp = 8.0; batch = 1e3 }")
    assert s.plans["p"].tp == 8 and isinstance(s.plans["p"].tp, int) and s.plans["p"].batch == 1000


def test_weight_bytes_replaces_params():
    s = ok("model m { layers = 126; hidden = 16384; weight_bytes = 405 GB; weights = fp8 }")
    assert s.models["m"].params is None and s.models["m"].total_weight_bytes == pytest.approx(405e9)


# --- names, extends, imports ------------------------------------------------------------------------------

def test_unknown_reference_did_you_mean():
    d = only(BASE + "cluster c { gpu = h10; intra_node = nv }", "E101")
    assert d.help == "did you mean `h100`?"


def test_wrong_kind_reference():
    d = only(BASE + "cluster c { gpu = nv; intra_node = nv }", "E108")
    assert "`nv` is a link" in d.message


def test_duplicate_points_at_both():
    r = check_text("link a { alpha = 1 us; bandwidth = 1 GB/s }\nlink a { alpha = 1 us; bandwidth = 1 GB/s }", "t.ccost")
    (d,) = r.diagnostics
    assert d.code == "E102" and (d.span.line, d.span.column) == (2, 6)
    assert d.notes == ("first defined as link `a` at t.ccost:1:6",)


def test_extends_must_be_same_kind_and_acyclic():
    assert codes(BASE + "gpu g extends nv { memory = 1 GB }") == ["E107"]
    assert codes("link a extends b { alpha = 1 us }\nlink b extends a { bandwidth = 1 GB/s }") == ["E107", "E107"]
    assert codes("link a extends a { alpha = 1 us; bandwidth = 1 GB/s }") == ["E107"]


def test_missing_required_reported_once_through_extends():
    # `b` inherits the gap from `a`: one error, on `a`
    r = check_text("link a { alpha = 1 us }\nlink b extends a { efficiency = 50 % }", "t.ccost")
    assert [(d.code, d.span.line) for d in r.diagnostics] == [("E104", 1)]
    assert "`bandwidth`" in r.diagnostics[0].message


def test_reference_cycle():
    d = only("link a { alpha = b.alpha; bandwidth = 1 GB/s }\nlink b { alpha = a.alpha; bandwidth = 1 GB/s }", "E112")
    assert "a.alpha → b.alpha → a.alpha" in d.message


def test_imports_relative_and_std(tmp_path: Path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "hw.ccost").write_text(BASE)
    (tmp_path / "main.ccost").write_text(
        'import "sub/hw.ccost"\nimport "std/links.ccost"\n'
        "plan p { model = m70; cluster = hgx; phase = decode; tp = 8 }\n")
    spec, warnings = load_spec(str(tmp_path / "main.ccost"))
    assert warnings == []
    assert spec.plans["p"].cluster.gpu.memory == pytest.approx(80e9)
    assert spec.local_plans == ("p",)
    assert spec.files[0] == str(tmp_path / "main.ccost")
    assert str(tmp_path / "sub" / "hw.ccost") in spec.files
    assert any(Path(f).name == "links.ccost" and Path(f).is_file() for f in spec.files)  # openable, for hashes
    assert len(spec.links) > 2  # the std links came in


def test_import_cycle_shows_the_chain(tmp_path: Path):
    (tmp_path / "a.ccost").write_text('import "b.ccost"\n')
    (tmp_path / "b.ccost").write_text('import "c.ccost"\n')
    (tmp_path / "c.ccost").write_text('import "a.ccost"\n')
    r = check_file(str(tmp_path / "a.ccost"))
    (d,) = r.diagnostics
    assert d.code == "E105" and d.span.file.endswith("c.ccost") and d.span.line == 1
    names = [Path(p.strip()).name for p in d.message.split(":", 1)[1].split("→")]
    assert names == ["a.ccost", "b.ccost", "c.ccost", "a.ccost"]


def test_missing_import_shows_the_chain(tmp_path: Path):
    (tmp_path / "a.ccost").write_text('import "b.ccost"\n')
    (tmp_path / "b.ccost").write_text('\n\nimport "gone.ccost"\n')
    r = check_file(str(tmp_path / "a.ccost"))
    (d,) = r.diagnostics
    assert d.code == "E106" and d.span.file.endswith("b.ccost") and (d.span.line, d.span.column) == (3, 8)
    assert [Path(p.strip()).name for p in d.notes[0].split(":", 1)[1].split("→")] == ["a.ccost", "b.ccost", "gone.ccost"]


def test_diamond_import_is_not_a_duplicate(tmp_path: Path):
    (tmp_path / "hw.ccost").write_text(BASE)
    (tmp_path / "l.ccost").write_text('import "hw.ccost"\n')
    (tmp_path / "r.ccost").write_text('import "hw.ccost"\n')
    (tmp_path / "top.ccost").write_text('import "l.ccost"\nimport "r.ccost"\n'
                                        "plan p { model = m70; cluster = hgx; phase = decode }\n")
    spec, _ = load_spec(str(tmp_path / "top.ccost"))
    assert list(spec.links) == ["nv", "ib"]


def test_imported_policy_does_not_leak(tmp_path: Path):
    (tmp_path / "lib.ccost").write_text("policy { max_overhead = 5 % }\n" + BASE)
    (tmp_path / "top.ccost").write_text('import "lib.ccost"\n')
    spec, _ = load_spec(str(tmp_path / "top.ccost"))
    assert spec.policy.max_overhead == pytest.approx(0.30)  # the default, not the import's 5 %
    (tmp_path / "top2.ccost").write_text('import "lib.ccost"\npolicy { max_overhead = 20 % }\n')
    spec, _ = load_spec(str(tmp_path / "top2.ccost"))
    assert spec.policy.max_overhead == pytest.approx(0.20)


def test_all_errors_of_spec_and_imports_at_once(tmp_path: Path):
    (tmp_path / "lib.ccost").write_text("link a { alpha = 2; bandwidth = 1 GB/s }\n")
    (tmp_path / "top.ccost").write_text('import "lib.ccost"\nlink b { alpha = 2 us; bandwidth = 1 GB }\n'
                                        "link c { alpha = 2 us; bandwidth = 1 GB/s; efficiency = 2 }\n")
    with pytest.raises(CcostError) as info:
        load_spec(str(tmp_path / "top.ccost"))
    found = sorted((Path(d.span.file).name, d.span.line, d.code) for d in info.value.diagnostics)
    assert found == [("lib.ccost", 1, "E201"), ("top.ccost", 2, "E201"), ("top.ccost", 3, "E203")]
    assert set(info.value.sources) == {str(tmp_path / "top.ccost"), str(tmp_path / "lib.ccost")}


def test_missing_file():
    r = check_file("/nonexistent/x.ccost")
    assert [d.code for d in r.diagnostics] == ["E002"] and r.spec is None


# --- topology -----------------------------------------------------------------------------------------------

def plan_codes(cluster: str, model: str, degrees: str) -> list[str]:
    return codes(BASE + f'''model moe {{ layers = 32; hidden = 4096; kv_heads = 8; params = 47e9; experts = 8 }}
plan p {{ model = {model}; cluster = {cluster}; phase = decode; {degrees} }}''')


def test_degrees_must_fit_cluster():
    assert plan_codes("hgx", "m70", "tp = 8; pp = 2") == ["E301"]
    assert plan_codes("two", "m70", "tp = 8; pp = 2") == []
    assert plan_codes("two", "m70", "tp = 8; dp = 2; ep = 1") == []
    assert plan_codes("two", "moe", "tp = 2; ep = 4; dp = 4") == ["E301"]  # 2·1·4·4 = 32 > 16
    d = check_text(BASE + "plan p { model = m70; cluster = hgx; phase = decode; tp = 8; pp = 2 }", "t").errors[0]
    assert "8·2·1·1 = 16 GPUs" in d.message and "1 node × 8 = 8" in d.message


def test_topology_warnings():
    assert plan_codes("two", "m70", "tp = 16") == ["W301", "W302"]     # 16 > 8-GPU domain; 8 kv heads
    assert plan_codes("hgx", "m70", "tp = 3") == ["W302"]              # 8 % 3 != 0
    assert plan_codes("hgx", "m70", "tp = 4; pp = 2") == []            # 8 % 4 == 0, 80 % 2 == 0
    assert plan_codes("two", "m70", "pp = 3") == ["W303"]              # 80 % 3 != 0
    assert plan_codes("hgx", "moe", "ep = 3") == ["W304"]              # 8 % 3 != 0
    assert plan_codes("hgx", "m70", "ep = 2") == ["W304"]              # no experts at all
    assert plan_codes("hgx", "moe", "ep = 8") == []
    r = check_text(BASE + "plan p { model = m70; cluster = two; phase = decode; tp = 16 }", "t")
    assert r.spec is not None  # warnings leave a usable spec
    assert "legitimate but costly" in r.warnings[0].help


def test_nvlink_domain_bigger_than_a_node():
    # NVL72-style: 18 nodes x 4 GPUs in one 72-GPU NVLink domain; TP=8 crosses nodes but stays on NVLink
    assert codes(BASE + '''cluster nvl72 { gpu = h100; nodes = 18; gpus_per_node = 4; nvlink_domain = 72
      intra_node = nv; inter_node = ib }
plan p { model = m70; cluster = nvl72; phase = decode; tp = 8 }''') == []


def test_inter_node_required_on_multi_node():
    d = only(BASE + "cluster c { gpu = h100; nodes = 4; intra_node = nv }", "E302")
    assert "inter_node" in d.message


def test_decode_plan_on_gpu_without_hbm_bandwidth():
    r = check_text('''link nv { alpha = 2 us; bandwidth = 450 GB/s }
gpu g { memory = 80 GB; flops = 989 TFLOP/s }
cluster c { gpu = g; intra_node = nv }
model m { layers = 80; hidden = 8192; params = 70e9 }
plan p { model = m; cluster = c; phase = decode }''', "t.ccost")
    (d,) = r.diagnostics  # one error, at the gpu; the plan does not pile more on
    assert d.code == "E104" and d.span.line == 2
    assert "`hbm_bandwidth`" in d.message and "decode" in d.message
    assert d.help == "add `hbm_bandwidth = 3.35 TB/s`"


# --- sweeps and compares --------------------------------------------------------------------------------------

def test_sweep_fields_checked_like_plan_fields():
    s = ok(BASE + '''plan p { model = m70; cluster = hgx; phase = decode }
sweep s { base = p; batch = [1, 8, 64]; allreduce = [ring, tree]; overlap = [0 %, 50 %]; cluster = [hgx, two]; seq = 4096 }''')
    sw = s.sweeps["s"]
    assert [f for f, _ in sw.fields] == ["batch", "allreduce", "overlap", "cluster", "seq"]
    assert dict(sw.fields)["batch"] == (1, 8, 64)
    assert dict(sw.fields)["allreduce"] == ("ring", "tree")
    assert dict(sw.fields)["overlap"] == (0.0, 0.5)
    assert dict(sw.fields)["cluster"] == (s.clusters["hgx"], s.clusters["two"])  # entities: replace(base, ...)
    assert dict(sw.fields)["seq"] == (4096,)  # one value fixes the field for every point
    assert codes(BASE + "plan p { model = m70; cluster = hgx; phase = decode }\nsweep s { base = p; tp = [1, 0] }") == ["E203"]
    assert codes(BASE + "plan p { model = m70; cluster = hgx; phase = decode }\nsweep s { base = p; allreduce = [ring, treee] }") == ["E204"]


def test_sweep_size_is_bounded():
    big = ", ".join(str(i) for i in range(1, 401))
    assert codes(BASE + f"plan p {{ model = m70; cluster = hgx; phase = decode }}\nsweep s {{ base = p; batch = [{big}]; seq = [{big}] }}") == ["E402"]


def test_compare():
    s = ok(BASE + '''plan a { model = m70; cluster = hgx; phase = decode }
plan b extends a { tp = 8 }
compare c { plans = [a, b]; by = throughput }''')
    assert s.compares["c"].plans == (s.plans["a"], s.plans["b"]) and s.compares["c"].by == "throughput"
    assert codes(BASE + "plan a { model = m70; cluster = hgx; phase = decode }\ncompare c { plans = a }") == ["E205"]
    assert codes(BASE + "compare c { plans = [] }") == ["E203"]


# --- empty specs and the CLI ------------------------------------------------------------------------------

def test_empty_spec_is_valid_and_the_cli_says_it_has_no_plans(tmp_path: Path, capsys):
    (tmp_path / "empty.ccost").write_text("")
    (tmp_path / "comments.ccost").write_text("# nothing yet\n\n")
    for name in ("empty.ccost", "comments.ccost"):
        s = ok((tmp_path / name).read_text(), name)
        assert s.plans == {} and s.policy.max_overhead == pytest.approx(0.3)
        assert cli.main(["check", str(tmp_path / name)]) == 0
    out = capsys.readouterr().out
    assert out.count("ok (0 plans) — note: it defines no plans") == 2


# --- every example spec and std file ---------------------------------------------------------------------

@pytest.mark.parametrize("path", EXAMPLES + STD, ids=[p.name for p in EXAMPLES + STD])
def test_shipped_specs_check_clean(path: Path):
    r = check_file(str(path))
    assert r.errors == [], "\n".join(f"{d.span}: {d.code} {d.message}" for d in r.errors)
    assert r.spec is not None


def test_there_are_example_specs():
    assert len(EXAMPLES) >= 5 and len(STD) >= 3


def test_phase_is_one_of_three():
    assert codes(BASE + "plan p { model = m70; cluster = hgx; phase = inference }") == ["E204"]
    assert codes(BASE + "plan p { model = m70; cluster = hgx; phase = train }") == ["E104"]  # seq required
    assert codes(BASE + "plan p { model = m70; cluster = hgx; phase = train; seq = 4096 }") == []


def test_enum_word_where_a_number_belongs():
    d = only("link l { alpha = 2 us; bandwidth = tree }", "E205")
    assert d.message == "`tree` is a value of `allreduce`, not a number"


def test_non_utf8_file_still_shows_its_line(capsys):
    assert cli.main(["check", str(REPO / "tests" / "bad" / "non_utf8.ccost")]) == 2
    err = capsys.readouterr().err
    assert "error[E002]" in err and "3 |   bandwidth = \ufffd450 GB/s  # E:15: E002" in err
    assert "\n  |               ^\n" in err  # under column 15, the bad byte


def test_tp_beyond_the_node_second_fix_checks_too(tmp_path: Path):
    """README's mistake, tp = 16 on the 8-GPU node of A1: the help's other way out (two nodes and an
    inter-node link from the std library) must check, and nodes = 2 alone is the error it warns about."""
    a1 = (REPO / "specs" / "a1-tp-decode.ccost").read_text(encoding="utf-8")
    wrong = a1.replace("  tp        = 8\n", "  tp        = 16\n", 1)
    assert wrong != a1
    result = check_text(wrong, str(tmp_path / "a1.ccost"))
    [e301] = [d for d in result.diagnostics if d.code == "E301"]
    assert (e301.span.line, wrong.splitlines()[e301.span.line - 1].strip()) == (
        e301.span.line, "tp        = 16")
    assert "inter-node" not in " ".join(d.message for d in result.diagnostics)
    # A1 defines its own `nvlink4`, so importing std/links.ccost would clash: the help offers a link block
    assert "`nodes = 2`" in e301.help and "std/links.ccost" not in e301.help
    assert "`link ib { alpha = 3 us; bandwidth = 50 GB/s }` and `inter_node = ib`" in e301.help
    two = wrong.replace("  nodes         = 1\n", "  nodes         = 2\n", 1)
    only_nodes = check_text(two, str(tmp_path / "a1.ccost"))
    assert any(d.is_error for d in only_nodes.diagnostics)  # nodes = 2 without a link: not enough
    linked = two.replace("  intra_node    = nvlink4\n", "  intra_node    = nvlink4\n  inter_node    = ib\n", 1)
    linked += "\nlink ib { alpha = 3 us; bandwidth = 50 GB/s }\n"
    fixed = check_text(linked, str(tmp_path / "a1.ccost"))
    assert [d.message for d in fixed.diagnostics if d.is_error] == []


def test_tp_beyond_the_node_offers_the_std_link_when_it_imports_cleanly(tmp_path: Path):
    spec = ('import "std/gpus.ccost"\nimport "std/models.ccost"\n'
            "cluster one { gpu = h100; nodes = 1; gpus_per_node = 8; intra_node = nv }\n"
            "link nv { alpha = 2 us; bandwidth = 450 GB/s }\n"
            "plan p { model = llama3_70b; cluster = one; phase = decode; tp = 16 }\n")
    result = check_text(spec, str(tmp_path / "s.ccost"))
    [e301] = [d for d in result.diagnostics if d.code == "E301"]
    assert '`inter_node = ib_ndr`, from `import "std/links.ccost"`' in e301.help
    fixed = 'import "std/links.ccost"\n' + spec.replace("tp = 16", "tp = 16").replace(
        "nodes = 1;", "nodes = 2; inter_node = ib_ndr;")
    assert [d.message for d in check_text(fixed, str(tmp_path / "s.ccost")).diagnostics if d.is_error] == []


def train_codes(fields: str) -> list[str]:
    # batch = 12: the micro-batches below hold a sequence each (more is E401, which `check` reports too)
    return codes(BASE + f"plan p {{ model = m70; cluster = two; phase = train; seq = 4096; batch = 12; {fields} }}")


def test_training_choices_without_effect_warn():
    assert train_codes("pp = 2; microbatches = 4; schedule = interleaved; virtual_stages = 2") == []
    assert train_codes("pp = 2; microbatches = 4; schedule = interleaved") == ["W305"]  # v = 1: plain 1F1B
    assert train_codes("schedule = interleaved; virtual_stages = 2") == ["W305"]  # no pipeline
    assert train_codes("pp = 2; microbatches = 3; schedule = interleaved; virtual_stages = 2") == ["W305"]
    assert train_codes("pp = 2; virtual_stages = 2") == ["W305"]  # not interleaved
    assert train_codes("sequence_parallel = true") == ["W305"]  # tp = 1
    assert train_codes("tp = 8; sequence_parallel = true; dp = 2; optimizer_sharding = zero1") == []
    assert train_codes("dp = 2; fsdp = true; optimizer_sharding = zero2") == ["W305"]
    r = check_text(BASE + "plan p { model = m70; cluster = two; phase = decode; recompute = full }", "t")
    assert [d.code for d in r.warnings] == ["W305"] and "`recompute` applies only to training" in \
        r.warnings[0].message


def test_a_missing_reference_is_helped_with_a_name_the_file_sees():
    # The schema's example (`hgx`) is not a cluster of the std library: the help names one the file sees.
    r = check_text('import "std/clusters.ccost"\nimport "std/models.ccost"\n'
                   'plan p { model = llama3_70b; phase = decode; tp = 8 }\n', "t.ccost")
    (d,) = [d for d in r.errors if d.code == "E104"]
    assert d.help.startswith("add `cluster = dgx_a100` (or dgx_b200, hgx_h100,"), d.help
    # nothing of that kind in scope: say where the bundled ones are
    r = check_text("plan p { phase = decode; tp = 8 }\n", "t.ccost")
    helps = sorted(d.help for d in r.errors if d.code == "E104")
    assert helps == ['add `cluster = NAME` naming a cluster block: import "std/clusters.ccost" for the bundled '
                     'ones, or declare one',
                     'add `model = NAME` naming a model block: import "std/models.ccost" for the bundled ones, '
                     'or declare one']
