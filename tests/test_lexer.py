"""The .ccost Pygments lexer: right token for each construct, never an error token, found by name."""

from __future__ import annotations

from pathlib import Path

import pytest
from ccost.lexer import CcostLexer, Unit
from pygments import lex
from pygments.lexers import get_lexer_by_name, get_lexer_for_filename
from pygments.token import Comment, Error, Keyword, Name, Number, Operator, String

SAMPLE = '''# Llama-3-70B decode
import "std/h100.ccost"
link nvlink4 "NVLink 4 \\"switch\\"" {
  alpha     = 2 us                  # per hop
  bandwidth = 450 GB/s
}
cluster hgx { gpu = h100; nodes = 1; intra_node = nvlink4 }
model m { params = 70.6e9; layers = 80 }
plan tp8 { model = m; cluster = hgx; tp = 8 }
plan tp8_tree extends tp8 { allreduce = tree; overlap = 30 % }
sweep s { base = tp8_tree; tp = [1, 2, 4] }
policy { max_memory = max(0.5, h100.memory / 100 GB) }
'''


def tokens(text: str) -> list[tuple[object, str]]:
    return [(t, v) for t, v in lex(text, CcostLexer()) if v.strip()]


def test_constructs_get_their_token_types():
    toks = tokens(SAMPLE)
    assert (Comment.Single, "# Llama-3-70B decode") in toks
    assert (Keyword.Namespace, "import") in toks
    assert (Keyword.Declaration, "link") in toks and (Name.Class, "nvlink4") in toks
    assert (String.Escape, '\\"') in toks
    assert (Number, "450") in toks and (Unit, "GB/s") in toks
    assert (Number, "70.6e9") in toks
    assert (Unit, "%") in toks
    assert (Keyword, "extends") in toks
    assert (Name.Builtin, "max") in toks
    assert (Operator, "/") in toks


def test_block_kind_used_as_field_name_is_a_field():
    # `model = m` inside a plan is a field; `model m {` opens a block.
    toks = tokens("plan p { model = m; cluster = c }\nmodel m { layers = 1 }")
    assert toks[3] == (Name.Attribute, "model")
    assert (Keyword.Declaration, "model") in toks
    assert (Name.Attribute, "cluster") in toks
    assert (Keyword.Declaration, "cluster") not in toks


def test_policy_block_without_a_name():
    toks = tokens("policy { max_overhead = 30 % }")
    assert toks[0] == (Keyword.Declaration, "policy")


def test_text_round_trips_and_no_error_tokens_even_on_garbage():
    garbage = SAMPLE + '\n@@ ~ `weird` "unterminated\n$ 1e\n'
    toks = list(lex(garbage, CcostLexer()))
    assert "".join(v for _, v in toks) == garbage  # every character accounted for (pygments adds final \n)
    assert not [t for t, _ in toks if t in Error]


def test_example_specs_lex_without_error_tokens():
    repo = Path(__file__).resolve().parents[1]
    specs = sorted(repo.glob("specs/**/*.ccost"))
    for path in specs:
        toks = list(lex(path.read_text(encoding="utf-8"), CcostLexer()))
        assert not [t for t, _ in toks if t in Error], path


def test_registered_with_pygments():
    # pyproject.toml's entry point: editors and `pygmentize -l ccost` find the lexer by name and suffix.
    assert isinstance(get_lexer_by_name("ccost"), CcostLexer)
    assert isinstance(get_lexer_for_filename("x.ccost"), CcostLexer)


@pytest.mark.parametrize("text", ["", "\n", "#", '"', "1 GB/s/s"])
def test_edge_inputs(text):
    assert "".join(v for _, v in lex(text, CcostLexer())).rstrip("\n") == text.rstrip("\n")
