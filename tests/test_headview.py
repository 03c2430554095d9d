"""The bertviz-style head view (HTML), the model view's thumbnails and token groups, on real traces."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from bertgeom.analysis.token_groups import contiguous_groups, group_attention, window_bounds
from bertgeom.figures.headview import head_view_html, head_view_links, model_view, pooled
from bertgeom.trace import run_trace


@pytest.fixture(scope="module")
def trace(tiny_bert):
    return run_trace(tiny_bert, "The cat sat on the mat because it was tired.")


def _payload(html: str) -> dict:
    return json.loads(re.search(r"const D = (\{.*?\});\n", html, re.S).group(1).replace("<\\/", "</"))


def test_links_are_exactly_the_weights_above_the_cut(trace):
    a = trace.attentions[1]
    links = head_view_links(a, min_weight=0.05)
    h, q, k = np.nonzero(a >= 0.05)
    assert links.shape == (h.size, 4)
    np.testing.assert_array_equal(links[:, :3].astype(int), np.column_stack([h, q, k]))
    np.testing.assert_allclose(links[:, 3], a[h, q, k], atol=5e-4)


def test_html_is_self_contained_and_carries_every_head(trace):
    tokens = list(trace.tokens)
    tokens[2] = "</script><b>x"  # a token can never end the script early
    html = head_view_html(trace.attentions[0], tokens, min_weight=0.02)
    assert "http://" not in html.replace("http://www.w3.org", "") and "https://" not in html  # no CDN
    assert html.count("</script>") == 1
    data = _payload(html)
    assert data["q"][2] == "</script><b>x"
    assert len(data["heads"]) == trace.num_heads and len({h["colour"] for h in data["heads"]}) == trace.num_heads
    assert len(data["links"]) == int((trace.attentions[0] >= 0.02).sum())


def test_groups_keep_every_link_summed():
    rng = np.random.default_rng(0)
    a = rng.random((3, 10, 10))
    a /= a.sum(-1, keepdims=True)
    groups = contiguous_groups(["", "A", "A", "A", "B", "B", "C", "C", "C", ""])
    assert [g.name for g in groups] == ["—", "A", "B", "C", "—"]
    g = group_attention(a, groups)
    np.testing.assert_allclose(g.sum(-1), 1.0)
    # A's queries (1..3) on B's keys (4, 5): mean over rows of the row sums
    np.testing.assert_allclose(g[:, 1, 2], a[:, 1:4, 4:6].sum(-1).mean(-1))
    assert window_bounds(100, 95, 30) == (70, 100) and window_bounds(10, -3, 30) == (0, 10)


def test_thumbnails_keep_the_mean_and_a_click_names_the_head(trace):
    p = pooled(trace.attentions, 4)
    assert p.shape[-2:] == (4, 4)
    np.testing.assert_allclose(p.mean(axis=(-1, -2)), trace.attentions.mean(axis=(-1, -2)), rtol=0.2)
    imp = np.array([[0.0, 1.0, 0.5, 0.2], [0.1, 0.3, 0.9, 0.4]])
    fig = model_view(trace.attentions, importance=imp, selected=(1, 2))
    heat = [t for t in fig.data if t.type == "heatmap"]
    assert len(heat) == trace.num_layers * trace.num_heads
    width = [t.dx * len(t.z) for t in heat]  # drawn size grows with importance
    assert width[1] > width[2] > width[3] > width[0]
    pick = [t for t in fig.data if t.type == "scatter"][0]
    assert [list(c) for c in pick.customdata][6] == [1, 2]


def test_the_head_view_tab_is_drawn_by_st_iframe_and_no_deprecated_streamlit_call():
    """Issue 47: ``st.components.v1.html`` is deprecated (removal announced after 2026-06-01) and was
    logged at every draw of the tab; the tab now hands the same self-contained page to ``st.iframe``,
    and no Streamlit deprecation notice is logged while the page is drawn."""
    import logging
    from pathlib import Path

    from heads_page import open_heads_page

    notices: list[str] = []

    class Catch(logging.Handler):
        def emit(self, record):
            notices.append(record.getMessage())

    logger = logging.getLogger("streamlit.deprecation_util")  # every notice of Streamlit's goes through it
    handler = Catch(level=logging.WARNING)
    logger.addHandler(handler)
    try:
        at = open_heads_page("Head view", model_id="tiny-random")
    finally:
        logger.removeHandler(handler)
    assert not notices, notices
    frames = at.get("iframe")
    assert len(frames) == 1 and not frames[0].proto.src
    page = frames[0].proto.srcdoc
    assert 'id="hv"' in page and "<script>" in page  # the interactive page, scripts and all
    assert "https://" not in page and "http://" not in page.replace("http://www.w3.org", "")  # nothing fetched
    root = Path(__file__).resolve().parent.parent
    sources = [*(root / "bertgeom").rglob("*.py"), *(root / "app_pages").glob("*.py"), root / "app.py"]
    assert not [str(p) for p in sources if _uses_components_v1(p)]


def _uses_components_v1(path) -> bool:
    """Whether the code (not its text) imports ``streamlit.components.v1`` or reaches ``st.components.v1``."""
    import ast

    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import) and any(a.name.startswith("streamlit.components") for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("streamlit.components"):
            return True
        if isinstance(node, ast.Attribute) and node.attr == "v1" and getattr(node.value, "attr", "") == "components":
            return True
    return False
