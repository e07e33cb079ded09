"""The figures README.md and docs/*.md quote come from ccost.

Every figure a page quotes from a bundled spec is wrapped in a marker that names the spec, the value and the
format (``ccost.docfigures``'s docstring; docs/architecture.md lists the command). The first test fails on
any figure that is no longer what ccost computes, naming the page, the line and the command that rewrites
it; the others show, on hand-worked numbers of worked example A1 (docs/examples.md), that the markers read
the value they name and that a wrong or broken marker cannot pass. Blocks of ``ccost`` output shown in the
docs are checked against the command at the end.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ccost import cli, docfigures as D

REPO = Path(__file__).resolve().parents[1]


QUOTED = D.quoted_specs(REPO)


def test_the_pages_quote_the_specs_they_are_about():
    # README, cost (its own example), serving, examples (A1-A4, B, the showcases), git-workflow (its own
    # plan), interface, search, training: the scan must find them, or the test below checks nothing
    assert len(QUOTED) >= 20 and "specs/a1-tp-decode.ccost" in QUOTED and "docs/cost.md:cost-example.ccost" in QUOTED


# One test per spec quoted (each checks the figures every page reads from it): the specs are checked and
# evaluated once each, and the work spreads over the inner loop's workers.
@pytest.mark.parametrize("spec", QUOTED)
def test_every_figure_in_the_docs_is_what_ccost_computes(spec):
    stale, count = D.run(REPO, write=False, only=spec)
    assert count > 0
    assert not stale, (f"figures the docs quote from {spec} are stale:\n" + "\n".join(map(str, stale))
                       + f"\n{len(stale)} stale: run `{D.COMMAND}` and read the diff")


def test_the_count_of_figures():
    total = sum(len(D.figures(p.name, p.read_text(encoding="utf-8"))) for p in D.pages(REPO))
    assert total > 300


def test_every_page_with_figures_declares_its_specs():
    for page in D.pages(REPO):
        text = page.read_text(encoding="utf-8")
        figs = D.figures(page.name, text)  # raises on a marker in `code` or at the start of a line
        names = D.declarations(page.name, text)
        assert {f.spec for f in figs} <= set(names), page.name
    assert "<!--fig" in (REPO / "docs" / "cost.md").read_text() and "<!--fig" in (REPO / "README.md").read_text()


# ---------------------------------------------------------------------------------------------------
# Markers on a page of their own, against A1 worked out by hand: TP=8 ring AllReduce of
# 32 × 8192 × 2 B = 524,288 B (512 KiB), 160 per token, 14 hops of 2 µs and 917,504 B at 450 GB/s each:
# T_comm = 160 × (28 µs + 2.0389 µs) = 4.806 ms; compute 141 GB / 8 / 3.35 TB/s = 5.261 ms; overhead
# 4.806 / 5.261 = 91.4 %, over the policy's 30 %; the tree plan's 960 hops cost 1.92 ms of latency.

HEAD = "<!-- figures: a1 = specs/a1-tp-decode.ccost, tp8 = specs/a1-tp-decode.ccost tp8 -->\n\n"


def page(tmp_path: Path, body: str) -> Path:
    p = tmp_path / "page.md"
    p.write_text(HEAD + body, encoding="utf-8")
    return p


@pytest.mark.parametrize("marker, expected", [
    ("a1 plans.tp8.comm_time_s ms:.3f", "4.806"),
    ("tp8 comm_time_s ms:.3f", "4.806"),  # under a plan's name
    ("tp8 explain.T_comm ms:.3f", "4.806"),  # the derivation's step
    ("tp8 collectives[0].message_bytes KiB:g", "512"),
    ("tp8 collectives[kind=allreduce].message_bytes ,d", "524,288"),
    ("tp8 compute_time_s ms:.3f", "5.261"),
    ("tp8 overhead ~%", "91.4 %"),  # as ccost eval writes it
    ("tp8 comm_time_s ~", "4.806 ms"),
    ("tp8 comm_time_s/compute_time_s %:.1f", "91.4"),  # arithmetic, units cancel
    ("tp8 checklist[id=6].status pass=within|fail=over", "over"),
    ("tp8 gate.tp8 pass=passes|fail=fails", "fails"),
    ("a1 plans.tp8_tree.latency_term_s-plans.tp8.latency_term_s +=slower|-=faster", "faster"),
    ("a1 plans.tp8_tree.hops_per_step ,d", "960"),
    ("a1 plans.*.layout.tp d", "8"),  # alike in every plan
    ("a1 spec.link.nvlink4.bandwidth GB/s:g", "450"),
    ("a1 spec.policy.max_overhead %:g", "30"),
    ("a1 compares.algorithms.ranking[0]", "tp8_one_shot"),
    ("a1 sweeps.tp_scaling.points[tp=1].fits_memory true=fits|false=does not fit", "does not fit"),
])
def test_a_marker_reads_the_value_it_names(tmp_path, marker, expected):
    p = page(tmp_path, f"The value is <!--fig {marker}-->?<!--/fig--> here.\n")
    new, stale, count = D.regenerate(p, REPO)
    assert count == 1 and [s.new for s in stale] == [expected]
    assert new == HEAD + f"The value is <!--fig {marker}-->{expected}<!--/fig--> here.\n"


def test_a_stale_figure_names_the_page_the_line_and_the_command(tmp_path, capsys, monkeypatch):
    body = ("Ring T_comm is <!--fig tp8 comm_time_s ms:.3f-->4.806<!--/fig--> ms and\n"
            "compute <!--fig tp8 compute_time_s ms:.3f-->5.3<!--/fig--> ms.\n")
    p = page(tmp_path, body)
    _, stale, count = D.regenerate(p, REPO)
    assert count == 2 and len(stale) == 1
    msg = str(stale[0])
    assert msg.startswith(f"{p}:4: tp8 compute_time_s") and "`5.3`" in msg and "`5.261`" in msg
    assert "python -m ccost.docfigures" in msg
    # the command: --check fails and rewrites nothing; without it, only the stale figure changes
    monkeypatch.chdir(REPO)
    before = p.read_text()
    assert D.main(["--check", str(p)]) == 1 and p.read_text() == before
    assert f"{p}:4:" in capsys.readouterr().err
    assert D.main([str(p)]) == 0 and p.read_text() == before.replace(">5.3<", ">5.261<")
    assert D.main(["--check", str(p)]) == 0


@pytest.mark.parametrize("body, message", [
    ("x <!--fig nope comm_time_s ~-->1<!--/fig-->\n", "no spec named `nope`"),
    ("x <!--fig tp8 comm_time_s GB:.1f-->1<!--/fig-->\n", "a time, not"),  # a time written in GB
    ("x <!--fig tp8 step_tim ~-->1<!--/fig-->\n", "no `step_tim` here"),
    ("x <!--fig tp8 explain.T_com ~-->1<!--/fig-->\n", "did you mean"),
    ("x <!--fig tp8 checklist[id=6].status pass=within-->1<!--/fig-->\n", "no word for it"),
    ("x <!--fig a1 plans.*.layout.allreduce-->1<!--/fig-->\n", "differs between entries"),
    ("x <!--fig tp8 gpus .5d-->1<!--/fig-->\n", "format"),
    ("x `<!--fig tp8 gpus d-->8<!--/fig-->`\n", "inside `code`"),
    ("x\n<!--fig tp8 gpus d-->8<!--/fig--> GPUs\n", "starts with a figure marker"),
])
def test_a_broken_marker_is_an_error_naming_the_place(tmp_path, body, message):
    p = page(tmp_path, body)
    with pytest.raises(D.FigureError, match=re.escape(message)) as info:
        D.regenerate(p, REPO)
    assert f"{p}:" in str(info.value)


def test_the_command_says_a_broken_marker_and_exits_2(tmp_path, capsys, monkeypatch):
    p = page(tmp_path, "x <!--fig tp8 step_tim ~-->1<!--/fig-->\n")
    monkeypatch.chdir(REPO)
    assert D.main(["--check", str(p)]) == 2
    assert f"{p}:3:" in capsys.readouterr().err and p.read_text().endswith(">1<!--/fig-->\n")


def test_markers_in_code_blocks_are_shown_not_read(tmp_path):
    p = page(tmp_path, "```text\n<!--fig nope x-->1<!--/fig-->\n```\n")
    assert D.regenerate(p, REPO)[2] == 0


def test_a_spec_block_of_the_page_can_be_quoted(tmp_path):
    p = page(tmp_path, "<!-- figures: mine = my.ccost tp8 -->\n\n<!-- file: my.ccost -->\n```ccost\n"
                       + (REPO / "specs" / "a1-tp-decode.ccost").read_text()
                       + "```\n\nIt takes <!--fig mine comm_time_s ms:.3f-->?<!--/fig--> ms.\n")
    assert [s.new for s in D.regenerate(p, REPO)[1]] == ["4.806"]


# ---------------------------------------------------------------------------------------------------
# Blocks of ccost output shown in the docs

def test_the_policy_gate_output_shown_in_git_workflow_is_what_ccost_prints(capsys, monkeypatch):
    doc = (REPO / "docs" / "git-workflow.md").read_text(encoding="utf-8")
    block = doc.split("$ ccost check --policy specs/a3-multi-node.ccost\n", 1)[1].split("```", 1)[0]
    shown = [line for line in block.splitlines() if line.strip()]
    assert len(shown) >= 2
    monkeypatch.chdir(REPO)
    code = cli.main(["check", "--policy", "specs/a3-multi-node.ccost"])
    out, err = capsys.readouterr()
    assert code == 1  # the plans fail their policy, as the page says
    printed = (out + err).splitlines()
    assert [line for line in shown if line not in printed] == []


def test_the_diff_line_quoted_in_git_workflow_is_in_its_checked_example():
    """The bullet quotes one line of the `ccost diff` example below it, which tests/test_diff.py checks
    against ccost: the quote must be that line."""
    doc = (REPO / "docs" / "git-workflow.md").read_text(encoding="utf-8")
    quoted = re.search(r'"(overhead [^"]+ pp\))" says more than "([^"]+)"', doc)
    assert quoted
    block = doc.split("$ ccost diff specs/a1-tp-decode.ccost\n", 1)[1].split("```", 1)[0]
    lines = [line.strip() for line in block.splitlines()]
    assert "tp8 " + quoted.group(1).replace("overhead ", "overhead: ", 1) in lines
    # the relative change of the overhead is T_comm's (the compute did not change), shown on its line
    assert any(line.startswith("tp8 T_comm:") and line.endswith(f"({quoted.group(2)})") for line in lines)
