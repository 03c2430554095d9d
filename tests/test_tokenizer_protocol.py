"""One tokenizer protocol (issue 35, "typed results across layers"): ``LoadedModel.tokenizer`` is a
:class:`bertgeom.tokens.Tokenizer` for every family (a Hugging Face tokenizer, the genome plug-in's
k-mer vocabulary, a plain token list), and generic code reads only the protocol's members of it."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

import toy_family as toy
from bertgeom.models import REGISTRY, LoadedModel, load_model
from bertgeom.tokens import TokenList, Tokenizer
from bertgeom.trace import run_trace

ROOT = Path(__file__).resolve().parent.parent
#: The protocol's members, read from the class itself (a member added there is allowed here).
MEMBERS = frozenset(n for n in vars(Tokenizer) if not n.startswith("_"))
#: Generic code: the package less its plug-ins.
GENERIC = [p for p in (ROOT / "bertgeom").rglob("*.py") if "sars_cov_2" not in p.parts]


def test_the_protocol_names_what_generic_code_reads():
    assert MEMBERS == {"cls_token_id", "sep_token_id", "unk_token_id", "all_special_ids", "convert_ids_to_tokens"}


@pytest.mark.parametrize("model_id", sorted(REGISTRY))
def test_every_shipped_family_has_a_tokenizer_of_the_protocol(model_id):
    tok = load_model(model_id).tokenizer
    assert isinstance(tok, Tokenizer)
    special = tok.all_special_ids
    assert tok.cls_token_id in special and tok.sep_token_id in special
    assert tok.convert_ids_to_tokens([tok.cls_token_id, tok.sep_token_id]) == ["[CLS]", "[SEP]"]


def test_the_genome_and_toy_families_too(tiny_variant):
    from bertgeom.sars_cov_2.genome.kmers import KmerVocab

    assert isinstance(tiny_variant.tokenizer, KmerVocab) and isinstance(tiny_variant.tokenizer, Tokenizer)
    toy.register()
    try:
        tok = load_model(toy.MODEL_ID).tokenizer
    finally:
        toy.unregister()
    assert isinstance(tok, TokenList) and isinstance(tok, Tokenizer)
    assert tok.convert_ids_to_tokens([1, 3]) == ["[CLS]", "w"] and tok.unk_token_id is None


def test_a_tokenizer_outside_the_protocol_is_refused_at_loading(minilm):
    with pytest.raises(TypeError, match="Tokenizer"):
        LoadedModel(minilm.spec, minilm.model, ("[PAD]", "[CLS]", "[SEP]"), "x")  # the toy family's old tuple


class _OnlyTheProtocol:
    """A tokenizer that answers the protocol's members (and what ``allow`` names) and nothing else."""

    def __init__(self, inner, allow=()):
        self._inner, self._allow = inner, frozenset(allow)

    def __getattr__(self, name):
        if name in MEMBERS or name in self._allow:
            return getattr(self._inner, name)
        raise AssertionError(f"generic code read tokenizer.{name}, which is not in bertgeom.tokens.Tokenizer")

    def __call__(self, *args, **kwargs):  # the text kind's own step: a Hugging Face tokenizer's offsets
        return self._inner(*args, **kwargs)


def test_reading_a_text_uses_only_the_protocol_beside_the_text_kinds_offsets(minilm):
    strict = LoadedModel(minilm.spec, minilm.model, _OnlyTheProtocol(minilm.tokenizer), minilm.weights_hash)
    text = "The cat, unknown to all, sat on the mat ☃."
    a, b = run_trace(strict, text), run_trace(minilm, text)
    assert a.tokens == b.tokens and a.encoded.notes == b.encoded.notes
    assert np.array_equal(a.encoded.is_cls, b.encoded.is_cls) and np.array_equal(a.encoded.spans, b.encoded.spans)


def _tokenizer_reads(tree: ast.AST) -> list[tuple[int, str]]:
    """``(line, member)`` of every attribute read on a tokenizer in a module: ``x.tokenizer.member`` and
    ``name.member`` where ``name = x.tokenizer`` was bound in the same function."""
    out = []
    scopes = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module))]
    for scope in scopes:
        names = {t.id for n in ast.walk(scope) if isinstance(n, ast.Assign)
                 and isinstance(n.value, ast.Attribute) and n.value.attr == "tokenizer"
                 for t in n.targets if isinstance(t, ast.Name)}
        for n in ast.walk(scope):
            if not isinstance(n, ast.Attribute):
                continue
            base = n.value
            if (isinstance(base, ast.Attribute) and base.attr == "tokenizer") or (
                    isinstance(base, ast.Name) and base.id in names):
                out.append((n.lineno, n.attr))
    return out


def test_generic_code_reads_only_the_protocols_members_of_a_tokenizer():
    reads = {(str(p.relative_to(ROOT)), line, attr) for p in GENERIC
             for line, attr in _tokenizer_reads(ast.parse(p.read_text(encoding="utf-8")))}
    assert any(attr == "convert_ids_to_tokens" for _, _, attr in reads)  # the scan finds what is there
    assert {r for r in reads if r[2] not in MEMBERS} == set()
