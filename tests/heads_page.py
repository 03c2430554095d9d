"""Opening the Attention Heads page in an AppTest, shared by its page tests."""

from __future__ import annotations

import json
from pathlib import Path

from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parent.parent / "app.py")
PAGE = "app_pages/attention_heads.py"


def open_heads_page(tab: str = "Head detail", timeout: int = 600, **state) -> AppTest:
    """The page on ``tab`` with ``state`` in the session (MiniLM unless a model is given)."""
    state.setdefault("model_id", "minilm-l6")  # explicit: the default model may change
    at = AppTest.from_file(APP, default_timeout=timeout)
    for key, value in state.items():
        at.session_state[key] = value
    at.run()
    at.switch_page(PAGE)
    at.session_state["heads_tab"] = tab
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def chart_specs(at) -> list[dict]:
    return [json.loads(el.proto.spec) for el in at.get("plotly_chart")]


def page_text(at) -> str:
    return "\n".join([m.value for m in at.markdown] + [c.value for c in at.caption] + [i.value for i in at.info])
