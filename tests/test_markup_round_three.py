"""Nothing injected, round three (issue 33, items 1-5), in AppTest: a shared link's search and
section, a custom model's class labels, and the batch table's cells reach the page as text.

A rendered payload shows as ``![x](...)`` or ``[text](...)`` in an element's markdown source;
:func:`bertgeom.safety.plain` escapes ``!``, ``[``, ``]`` and ``(``, so neither pair stays adjacent.
The browser side (no request, no link formed) is ``tests/test_e2e_hostile_links.py``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from bertgeom.sars_cov_2.genome.dataset import load_demo_genomes

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "app.py")
IMAGE = "![x](http://127.0.0.1:9/x.png)"
LINK = "[Your session expired: sign in again](http://127.0.0.1:9/login)"


def _texts(at) -> list[str]:
    """The markdown source of every text element on the page."""
    kinds = ("markdown", "caption", "info", "warning", "error", "success", "subheader", "header", "title")
    return [str(el.value) for kind in kinds for el in at.get(kind)]


def _read(source: str) -> str:
    """What a reader sees of escaped markdown source (escapes and word joiners dropped)."""
    return source.replace("\\", "").replace("\u2060", "")


def _nothing_rendered(at) -> None:
    assert not at.exception
    for text in _texts(at):
        assert "![" not in text and "](" not in text, text


def test_a_shared_links_token_search_is_shown_as_text():
    at = AppTest.from_file(APP, default_timeout=600)
    at.session_state["model_id"] = "tiny-random"
    at.session_state["text_value"] = "The cat sat on the mat."
    at.query_params["heads_tab"] = "Queries & keys over a set"
    at.query_params["w_qk_search"] = f"{IMAGE} {LINK}"
    at.run()
    at.switch_page("app_pages/attention_heads.py").run()
    assert at.text_input(key="w_qk_search").value == f"{IMAGE} {LINK}"  # the link's search was read
    shown = [_read(t) for t in _texts(at) if "127" in t]
    assert any(f"'{IMAGE} {LINK}'" in t for t in shown), shown  # the search is quoted back, as text
    _nothing_rendered(at)


def test_a_methods_link_section_is_shown_as_text():
    at = AppTest.from_file(APP, default_timeout=600)
    at.query_params["section"] = "![](//0)"
    at.run()
    at.switch_page("app_pages/methods.py").run()
    assert any("has no section" in t for t in _texts(at))
    _nothing_rendered(at)


@pytest.fixture
def relabelled_model(tiny_variant_dir, tmp_path, monkeypatch):
    """The tiny variant model with class labels of its own: none of the eight, two of them markup."""
    folder = tmp_path / "relabelled"
    shutil.copytree(tiny_variant_dir, folder)
    cfg = json.loads((folder / "config.json").read_text())
    labels = [f"![x](http://127.0.0.1:9/label{i}.png)" if i % 2 else f"[lineage {i}](http://127.0.0.1:9/{i})"
              for i in range(len(cfg["id2label"]))]
    cfg["id2label"] = {str(i): label for i, label in enumerate(labels)}
    cfg["label2id"] = {label: i for i, label in enumerate(labels)}
    (folder / "config.json").write_text(json.dumps(cfg))
    (folder / "MODEL_CARD.md").write_text(f"# A card\n\n{IMAGE}\n")
    monkeypatch.setenv("BERTGEOM_ALLOW_CUSTOM_MODELS", "1")
    return folder, labels


def test_custom_class_labels_are_data_not_one_of_the_eight(relabelled_model):
    from bertgeom.safety import plain

    folder, labels = relabelled_model
    genome = load_demo_genomes()[0][0]
    at = AppTest.from_file(APP, default_timeout=600)
    at.session_state["model_id"] = str(folder)
    at.session_state["genome_value"] = f">g\n{genome.sequence}\n"
    at.run()
    at.switch_page("bertgeom/sars_cov_2/page.py").run()
    assert not at.exception  # no KeyError "unknown class"
    heading = next(t for t in _texts(at) if t.startswith("### "))
    assert any(heading.startswith(f"### {plain(label)} — ") for label in labels), heading
    assert any("not comparable" in t for t in _texts(at))  # the rule-based opinion compares with nothing
    assert not [t for t in _texts(at) if "disagrees" in t]
    _nothing_rendered(at)
    assert at.get("text") and any("label" not in t.value and "127.0.0.1:9/x.png" in t.value for t in at.get("text"))


def test_the_batch_table_is_drawn_with_formula_cells_neutralised(tiny_variant_dir, monkeypatch):
    genome = load_demo_genomes()[0][0].sequence
    names = ["=cmd|' /C calc'!A0", '=HYPERLINK("http://127.0.0.1:9/x","click")', "+1+1", "@SUM(A1)", "plain"]
    monkeypatch.setenv("BERTGEOM_ALLOW_CUSTOM_MODELS", "1")
    at = AppTest.from_file(APP, default_timeout=600)
    at.session_state["model_id"] = str(tiny_variant_dir)
    at.session_state["genome_value"] = "".join(f">{n}\n{genome}\n" for n in names)
    at.run()
    at.switch_page("bertgeom/sars_cov_2/page.py").run()
    assert not at.exception
    table = at.dataframe[0].value  # what Streamlit's own table download writes
    assert list(table["name"]) == ["'" + n for n in names[:4]] + ["plain"]
    for col in table.columns:
        assert not any(isinstance(v, str) and v.startswith(tuple("=+-@")) for v in table[col]), col
