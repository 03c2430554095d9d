"""docs/library.md's notebook quick start runs as written: its Python blocks, in order, in one
namespace (load, trace, the (name, layer) index, head features, pattern labels, cone, classify)."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parent.parent / "docs" / "library.md"


def python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def test_the_quick_start_runs_as_written(capsys):
    blocks = python_blocks(DOC.read_text(encoding="utf-8"))
    assert len(blocks) >= 5
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, str(DOC), "exec"), namespace)  # noqa: S102 - our own documentation
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "6 12 13"  # what the page says the first block prints
    tr, call = namespace["tr"], namespace["call"]
    assert namespace["curve"].shape == (tr.num_layers + 1,)
    assert call.error == "" and call.predicted in call.probs


def test_the_public_face_lists_what_it_offers():
    import bertgeom

    for name in ("load_model", "trace", "Trace", "head_features", "pattern_labels", "classify", "TokenKinds",
                 "InputKind", "KindWords"):
        assert name in bertgeom.__all__ and hasattr(bertgeom, name)


def test_the_registry_is_one_object_changed_in_place():
    from bertgeom.models import MINILM, REGISTRY, register

    before = list(REGISTRY)
    default = REGISTRY.default_id
    alias = __import__("bertgeom.models", fromlist=["REGISTRY"]).REGISTRY
    try:
        register(MINILM, first=True)
        assert alias is REGISTRY and alias.default_id == "minilm-l6" and list(alias)[0] == "minilm-l6"
    finally:
        register(REGISTRY[default], first=True)
    assert list(REGISTRY) == before and REGISTRY.default_id == default
