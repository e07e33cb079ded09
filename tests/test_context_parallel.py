"""Context parallelism (cp) in serving, added through its ccost.axes record and its collective in
ccost.model.lower: ring attention passes KV blocks between the cp ranks; the sequence is split cp ways."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ccost import evaluate
from ccost.check import check_text

REPO = Path(__file__).resolve().parent.parent

# Two nodes of 8 GPUs; links with round numbers so a transfer's time is easy to check by hand.
SPEC = '''import "std/models.ccost"
import "std/stacks.ccost"
link nv { alpha = 2 us; bandwidth = 400 GB/s }
link ib { alpha = 5 us; bandwidth = 50 GB/s }
gpu h100 { memory = 80 GB; hbm_bandwidth = 3.35 TB/s; flops = 989 TFLOP/s }
cluster two { gpu = h100; nodes = 2; gpus_per_node = 8; intra_node = nv; inter_node = ib }
plan one { model = llama3_70b; cluster = two; phase = prefill; seq = 32768; stack = ideal; tp = 1 }
plan cp2 { model = llama3_70b; cluster = two; phase = prefill; seq = 32768; stack = ideal; tp = 1; cp = 2 }
plan tp8 { model = llama3_70b; cluster = two; phase = prefill; seq = 32768; stack = ideal; tp = 8 }
plan tp8cp2 { model = llama3_70b; cluster = two; phase = prefill; seq = 32768; stack = ideal; tp = 8; cp = 2 }
plan dec { model = llama3_70b; cluster = two; phase = decode; seq = 32768; batch = 4; stack = ideal; tp = 8 }
plan dec_cp2 { model = llama3_70b; cluster = two; phase = decode; seq = 32768; batch = 4; stack = ideal; tp = 4; cp = 2 }
search s {
  base = tp8
  tp = [1, 2, 4, 8]
  cp = [1, 2]
  fits_memory = false
}
'''


@pytest.fixture(scope="module")
def spec_path(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cp")
    path = folder / "cp.ccost"
    path.write_text(SPEC)
    return path


@pytest.fixture(scope="module")
def docs(spec_path):
    r = check_text(spec_path.read_text(), str(spec_path))
    assert not r.errors, [d.message for d in r.errors]
    return {n: p.doc for n, p in evaluate.evaluate(r.spec).plans.items()}


def ring(doc):
    return [c for c in doc["collectives"] if c["purpose"].startswith("context-parallel ring")]


def test_ring_step_bytes_and_time_by_hand(docs):
    # Llama-3-70B prefill of 32,768 tokens, cp = 2, tp = 1: each rank holds 16,384 tokens; its KV block of
    # one layer is K and V of 8 KV heads of 128 elements at 2 bytes per token.
    block = 2 * 8 * 128 * 16384 * 2
    assert block == 67_108_864  # 64 MiB
    (cp,) = [c for c in ring(docs["cp2"]) if c["count"] > 0]
    assert cp["message_bytes"] == block
    assert cp["count"] == (2 - 1) * 80  # cp − 1 sends per layer, 80 layers
    assert cp["group_size"] == 2 and cp["link"] == "nv"  # both ranks in one NVLink domain
    # one send: α + m/B = 2 µs + 64 MiB / 400 GB/s
    t_send = 2e-6 + block / 400e9
    assert cp["time_s"] == pytest.approx(t_send, rel=1e-6)
    assert cp["total_time_s"] == pytest.approx(80 * t_send, rel=1e-6)
    assert not ring(docs["one"])  # no cp, no ring


def test_the_sequence_is_split_cp_ways(docs):
    one, two = docs["one"], docs["cp2"]
    assert two["gpus"] == 2 and one["gpus"] == 1
    # KV cache per GPU: 32,768 tokens · 80 layers · 2 · 8 · 128 · 2 B, halved
    kv = 32768 * 80 * 2 * 8 * 128 * 2
    assert one["memory"]["kv_cache_bytes"] == kv
    assert two["memory"]["kv_cache_bytes"] == kv / 2
    # weights replicated over cp, tokens of the step unchanged (cp splits sequences, adds none)
    assert two["weight_bytes_per_gpu"] == one["weight_bytes_per_gpu"]
    assert two["tokens_per_step"] == one["tokens_per_step"] == 32768
    assert two["compute"]["flops_per_gpu"] == pytest.approx(one["compute"]["flops_per_gpu"] / 2, rel=1e-9)
    assert two["compute_time_s"] < one["compute_time_s"]
    assert two["layout"]["cp"] == 2 and "cp" not in one["layout"]


def test_the_ring_leaves_the_domain_when_tp_cp_does(docs):
    # tp = 8, cp = 2: ranks 0–7 and 8–15 form the cp pairs (cp next to tp), so every ring step crosses ib
    (cx,) = [c for c in ring(docs["tp8cp2"]) if c["count"] > 0]
    assert cx["link"] == "ib"
    block = 2 * 1 * 128 * 16384 * 2  # one KV head per TP rank
    assert cx["message_bytes"] == block
    assert cx["time_s"] == pytest.approx(5e-6 + block / 50e9, rel=1e-6)
    # the TP AllReduce carries this rank's 16,384 tokens
    (tp,) = [c for c in docs["tp8cp2"]["collectives"] if c["purpose"].startswith("tensor-parallel")]
    assert tp["message_bytes"] == 16384 * 8192 * 2


def test_decode_splits_the_context(docs):
    dec, two = docs["dec"], docs["dec_cp2"]
    # tp 8 holds one KV head per GPU; tp 4 · cp 2 holds two heads of half the context: the same bytes
    assert two["memory"]["kv_cache_bytes"] == dec["memory"]["kv_cache_bytes"]
    (cp,) = [c for c in ring(two) if c["count"] > 0]
    # the local KV block of one layer: 4 sequences · 16,384 tokens · 2 · 2 heads · 128 · 2 B
    assert cp["message_bytes"] == 4 * 16384 * 2 * 2 * 128 * 2


def run(*args):
    return subprocess.run([sys.executable, "-m", "ccost", *args], capture_output=True, text=True, cwd=REPO)


def test_end_to_end(spec_path, tmp_path):
    r = run("check", str(spec_path))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "W305" not in r.stdout + r.stderr  # cp is priced in serving: no "applies only to training"
    r = run("eval", str(spec_path), "--format", "json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["plans"]["cp2"]["layout"]["cp"] == 2
    r = run("explain", str(spec_path), "cp2")
    assert r.returncode == 0, r.stderr
    assert "tp=1 pp=1 ep=1 dp=1 cp=2," in r.stdout
    assert "m_KV = KV_GPU·pp/L" in r.stdout
    assert "N = tp·pp·ep·dp·cp" in r.stdout
    out = tmp_path / "r.html"
    r = run("report", str(spec_path), "--format", "html", "-o", str(out))
    assert r.returncode == 0, r.stderr
    html = out.read_text()
    assert "tp·pp·ep·dp·cp" in html and "context-parallel ring" in html
    # the search varies cp as an array axis
    sdoc = doc["searches"]["s"]
    assert sdoc["axes"]["cp"] == [1, 2]
    # the GPU-count constraint names the degree the search varies
    (gpus,) = [c for c in sdoc["constraints"] if c["constraint"] == "max_gpus"]
    assert gpus["rule"].startswith("tp·pp·ep·dp·cp ≤ max_gpus")
    rows = {(r["tp"], r["cp"]): r for r in sdoc["top"]}
    # the arrays price each point as `ccost eval` prices the plan: with cp, and at cp = 1 exactly without it
    for (tp, cp), name in (((8, 2), "tp8cp2"), ((8, 1), "tp8")):
        assert rows[tp, cp]["step_time_s"] == pytest.approx(doc["plans"][name]["step_time_s"], rel=1e-6)
        assert rows[tp, cp]["gpus"] == tp * cp


def with_plan(name: str, fields: str, phase: str = "prefill"):
    """SPEC with one more Llama-3-70B plan (32,768 tokens) on `two`; the checked spec and every plan's
    document."""
    spec = SPEC.replace("plan one {", f"plan {name} {{ model = llama3_70b; cluster = two; phase = {phase}; "
                        f"seq = 32768; {fields} }}\nplan one {{")
    r = check_text(spec, "/nowhere/cp.ccost")
    assert not r.errors, [d.message for d in r.errors]
    return r.spec, {n: p.doc for n, p in evaluate.evaluate(r.spec).plans.items()}


def test_ring_sends_hide_behind_the_attention_of_the_block_held():
    # Under the operator roofline (serving_default) each send runs behind the attention of one layer
    # against the block already held: t_block = T_attn·pp/(L·cp), hidden min(T_send, t_block) per send.
    spec, docs = with_plan("op", "stack = serving_default; tp = 8; cp = 2")
    doc = docs["op"]
    eff = spec.stacks["serving_default"].attention_efficiency
    # attention of this rank, by hand: 16,384 of its tokens against a causal context of (32,768 + 1)/2,
    # 64/8 = 8 heads here, 2 FLOPs per multiply-add over QKᵀ and PV (2·128), 80 layers; FLOP-bound
    # (its 0.67 GB of KV written take 0.22 ms of HBM time).
    f_attn = 16384 * (32768 + 1) / 2 * 8 * 2 * 2 * 128 * 80
    t_attn = f_attn / (989e12 * eff)
    t_block = t_attn * 1 / (80 * 2)
    (cx,) = [c for c in ring(doc) if c["count"] > 0]
    assert cx["time_s"] < t_block  # an 8 MiB block over IB hides entirely behind 1.1 ms of attention
    hidden = cx["count"] * min(cx["time_s"], t_block)
    assert doc["exposed_comm_s"] == pytest.approx(doc["comm_time_s"] - hidden, rel=1e-9)
    # the whole-step roofline (ideal stack) has no attention term to hide behind: every send is exposed
    plain = docs["tp8cp2"]
    assert plain["exposed_comm_s"] == pytest.approx(plain["comm_time_s"], rel=1e-12)


def test_a_given_compute_time_counts_the_cp_ranks_in_the_one_gpu_time():
    # compute_time = 1 s per GPU on tp = 2 × cp = 2 of a prefill: one GPU alone would take 2·2 = 4 s, so
    # the speedup over one GPU is 4 s / (1 s + communication) and the efficiency that over 4 GPUs.
    doc = with_plan("given", "stack = ideal; tp = 2; cp = 2; compute_time = 1 s")[1]["given"]
    assert doc["gpus"] == 4
    assert doc["speedup"] == pytest.approx(4.0 / doc["step_time_s"], rel=1e-9)
    assert doc["efficiency"] == pytest.approx(doc["speedup"] / 4, rel=1e-9)


def test_a_decode_send_longer_than_its_block_attention_is_hidden_only_up_to_that_attention():
    # Decode, tp 4 × cp 2 inside one 8-GPU domain, serving_default: each rank reads its own block of the
    # KV cache (the context split cp ways), 4 sequences · 16,384 tokens · 80 layers · 2 (K, V) · 2 heads ·
    # 128 · 2 B = 5.37 GB, memory-bound at 3.35 TB/s · hbm_efficiency; one layer's share of that time is
    # far shorter than sending the layer's 67 MB block at 400 GB/s, so only that much is hidden per send.
    spec, docs = with_plan("dec_op", "batch = 4; stack = serving_default; tp = 4; cp = 2", phase="decode")
    doc = docs["dec_op"]
    kv_gpu = 4 * 16384 * 80 * 2 * 2 * 128 * 2
    t_block = kv_gpu / (3.35e12 * spec.stacks["serving_default"].hbm_efficiency) / 80
    (send,) = [c for c in ring(doc) if c["count"] > 0]
    assert send["message_bytes"] == kv_gpu / 80 and send["count"] == 80
    assert send["time_s"] == pytest.approx(2e-6 + kv_gpu / 80 / 400e9, rel=1e-6)
    assert send["time_s"] > 5 * t_block
    assert doc["exposed_comm_s"] == pytest.approx(doc["comm_time_s"] - 80 * t_block, rel=1e-9)
    # η is over the exposed communication, hidden sends excluded
    assert doc["eta"] == pytest.approx(doc["compute_time_s"] / (doc["compute_time_s"] + doc["exposed_comm_s"]),
                                       rel=1e-12)


def test_a_serve_plan_with_cp_is_refused_until_its_mixed_steps_price_the_ring():
    from ccost.diagnostics import CcostError

    spec = SPEC + ("plan srv { model = llama3_70b; cluster = two; phase = serve; tp = 4; cp = 2; "
                   "concurrency = 8; input_tokens = 1024; output_tokens = 64 }\n")
    r = check_text(spec, "/nowhere/cp.ccost")
    # `check` reports what eval refuses: the same rule, at the plan's cp
    assert [(d.code, d.span.line) for d in r.errors] == [("E401", spec.count("\n"))]
    assert "context parallelism" in r.errors[0].message
    from dataclasses import replace

    r = check_text(spec.replace("cp = 2; ", ""), "/nowhere/cp.ccost")
    with pytest.raises(CcostError) as e:
        evaluate.evaluate_plan(replace(r.spec.plans["srv"], cp=2), r.spec.policy)
    assert e.value.diagnostics[0].code == "E401" and "context parallelism" in e.value.diagnostics[0].message
