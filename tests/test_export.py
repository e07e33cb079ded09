"""`ccost export`: the engine launch settings a serving fleet assumes, and the benchmark that replays its
demand (ccost.launch). The flags are the engines' documented names (ccost/launch.py cites
where each comes from); the values are checked against the fleet's own fields and the traffic and policy
as written in the spec."""

from __future__ import annotations

import json
from pathlib import Path

from ccost import cli, evaluate, launch
from ccost import spec as S
from ccost.check import load_spec

SPECS = Path(__file__).resolve().parent.parent / "specs"
MIXTRAL = str(SPECS / "sla-mixtral-h100.ccost")
LLAMA70 = str(SPECS / "sla-llama70b-h200.ccost")


def ccost(capsys, *args) -> tuple[int, str, str]:
    code = cli.main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_the_chosen_fleets_flags_are_its_own_fields(capsys):
    code, out, err = ccost(capsys, "export", MIXTRAL)
    assert code == 0, err
    spec, _ = load_spec(MIXTRAL)
    chosen = evaluate.evaluate(spec).searches["fleet"]["chosen"]
    tp, ep, ms, st = chosen["tp"], chosen["ep"], chosen["max_seqs"], chosen["step_tokens"]
    assert f"--tensor-parallel-size {tp} " in out and f"--max-num-seqs {ms} " in out
    assert f"--max-num-batched-tokens {st} " in out and f"--chunked-prefill-size {st}" in out
    assert f"--max-running-requests {ms} " in out
    if ep > 1:  # ccost's ep ranks each run their own sequences: data parallel attention, experts spread
        assert f"--data-parallel-size {ep} --enable-expert-parallel" in out
        assert f"--tp-size {tp * ep} --ep-size {ep} --dp-size {ep} --enable-dp-attention" in out
    # the demand as the spec writes it: 10 requests/s at the peak, 1,024 in / 256 out, TTFT 500 ms, TPOT 30 ms
    bench = next(line.strip() for line in out.splitlines() if line.strip().startswith("vllm bench serve"))
    for flag in ("--dataset-name random", "--random-input-len 1024", "--random-output-len 256", "--request-rate 10",
                 "--num-prompts 2000", "--ignore-eos", "--goodput ttft:500 tpot:30", "--metric-percentiles 50,90,99"):
        assert flag in bench, flag
    assert "--burstiness" not in bench and "--random-range-ratio" not in bench  # Poisson, fixed lengths
    # the JSON is what `ccost eval` carries for the chosen fleet
    code, out, _ = ccost(capsys, "export", MIXTRAL, "fleet", "--format", "json")
    assert code == 0 and json.loads(out) == chosen["launch"]


def test_an_online_plans_own_engines(capsys):
    code, out, _ = ccost(capsys, "export", LLAMA70, "chat_tp4")
    assert code == 0
    assert "1 × (tp 4, pp 1, ep 1; 128 running requests, 8,192 tokens a step)" in out
    assert "--tensor-parallel-size 4 --pipeline-parallel-size 1 --max-num-seqs 128 --max-num-batched-tokens 8192" in out
    assert "--request-rate 8 " in out and "--goodput ttft:1000 tpot:30" in out  # the peak; the SLOs in ms


def test_a_disaggregated_fleet_has_prefill_and_decode_engines():
    t = S.Traffic("t", None, None, rate=4.0, peak_rate=6.0, burstiness=2.0, input_tokens=2000, output_tokens=300,
                  input_range=0.5)
    policy = S.Policy("policy", None, None, max_ttft=0.8, max_e2e=20.0)
    fleet = {"tp": 4, "pp": 1, "ep": 1, "dp": 2, "max_seqs": 64, "step_tokens": 4096, "prefill_workers": 1,
             "decode_workers": 2, "prefill_tp": 2}
    s = launch.settings(fleet, t, 6.0, policy)
    pre, dec = s["engines"]
    assert (pre["role"], pre["count"], pre["tp"]) == ("prefill", 2, 2)  # dp × prefill_workers, at prefill_tp
    assert (dec["role"], dec["count"], dec["tp"]) == ("decode", 4, 4)  # dp × decode_workers, at tp
    assert "--disaggregation-mode prefill" in pre["sglang"] and "--disaggregation-mode decode" in dec["sglang"]
    assert "NixlConnector" in pre["vllm"] and "NixlConnector" in dec["vllm"]
    b = s["benchmark"]
    # vLLM's --burstiness is the gamma shape 1/CV²: a CV of 2 is 0.25; the uniform spread is vLLM's range ratio
    assert "--burstiness 0.25" in b and "--random-range-ratio 0.5" in b and "--request-rate 6 " in b
    assert "--goodput ttft:800 e2el:20000" in b


def test_nothing_to_export_is_e514(capsys, tmp_path):
    code, _, err = ccost(capsys, "export", str(SPECS / "a1-tp-decode.ccost"))
    assert code == 2 and "E514" in err and "no online plan and no capacity search" in err
    code, _, err = ccost(capsys, "export", LLAMA70, "nosuch")
    assert code == 2 and "E514" in err and "export one of: fleet, chat_tp4" in err
    spec = tmp_path / "s.ccost"
    spec.write_text(f'import "{SPECS}/std/gpus.ccost"\n', encoding="utf-8")  # absolute: refused by the checker
    code, _, err = ccost(capsys, "export", str(spec))
    assert code == 2  # the checker's error, not a traceback
