"""Home: what the dashboard shows and how to start, for a newcomer or a class."""

import streamlit as st

from bertgeom.examples import example_sentences
from bertgeom.extensions import START_EXAMPLES, registered_page, registered_pages
from bertgeom.inputs import INPUT_KINDS
from bertgeom.models import REGISTRY
from bertgeom.ui.state import select_head, widget_key
from bertgeom.ui.tour import tour_overview


def _use_sentence(sentence: str) -> None:
    """Load ``sentence`` on MiniLM with its strongest previous-token head selected (computed on the
    click, not while the home page is drawn)."""
    st.session_state["text_value"] = sentence
    st.session_state["w_text"] = sentence
    st.session_state["model_id"] = "minilm-l6"
    select_head(*_prev_head(sentence))


@st.cache_data(show_spinner=False, max_entries=4)
def _tour_facts(sentence: str) -> dict[str, str]:
    """The tour's claims, computed from MiniLM on ``sentence`` (never written by hand)."""
    from bertgeom.analysis.tour_facts import tour_facts
    from bertgeom.ui.cache import cached_head_features, subject_of

    return tour_facts(cached_head_features(subject_of("minilm-l6", sentence)))


def _prev_head(sentence: str) -> tuple[int, int]:
    """The strongest previous-token head of MiniLM on ``sentence`` (L1 H1 if MiniLM is absent)."""
    if "minilm-l6" not in REGISTRY:
        return 0, 0
    layer, head = _tour_facts(sentence)["prev_head"].split(",")
    return int(layer), int(head)


def _use_example(model_id: str, index: int) -> None:
    """Open ``model_id`` on its input kind's example ``index``."""
    kind = INPUT_KINDS.of(REGISTRY[model_id])
    text = kind.examples()[index].text
    st.session_state[kind.session_key] = text
    st.session_state[widget_key(kind)] = text
    st.session_state["model_id"] = model_id


st.title("bertgeom — the geometry of BERT's attention")
tour_overview()
PLUGGED = "".join(f"* **{page.title}** — {page.summary}\n" for page in registered_pages() if page.summary)
st.markdown(
    """
BERT reads its input (a sentence, say) as a row of **tokens**. In every
layer, each **attention head** lets every token look at the others and mix in what it finds.
bertgeom opens that machinery up:

* **Attention Heads** — every head at a glance; click one to see *who looks at whom*. Some heads
  look at the previous token, some at the next, some park their attention on `[CLS]`/`[SEP]`,
  some spread it everywhere. Patterns are named after Kovaleva et al. and the 2025 "gates".
* **Subspace Directions** — what each head searches for: the geometry of its query and key
  projections, and whether its attention pushes all tokens in one direction.
* **Cone Index per Layer** — how tightly the token vectors bunch into a narrow cone as they
  flow through the layers, and where the classes separate.
""" + PLUGGED + """
The methods follow Bonino, Ghione & Cirrincione 2025 (*The geometry of BERT*, arXiv:2502.12033),
Clark et al. 2019 (arXiv:1906.04341), Kovaleva et al. 2019 (arXiv:1908.08593) and Guan et al. 2020
(arXiv:2011.00943). Where a paper's exact definition could not be
recovered, the page says so and lets you move the thresholds; every definition, with its paper
and section, is in [docs/methods.md](/?view=methods) (the *Methods* page).
"""
)

st.subheader("Start here")
c1, c2 = st.columns(2)
with c1:
    st.markdown("**English text** (MiniLM, a pretrained BERT)")
    sentences = example_sentences()
    if st.button(f"“{sentences[0]}”", on_click=_use_sentence, args=(sentences[0],), key="w_home_s0"):
        st.switch_page("app_pages/attention_heads.py")
    if st.button(f"“{sentences[2]}”", on_click=_use_sentence, args=(sentences[2],), key="w_home_s1"):
        st.switch_page("app_pages/attention_heads.py")
with c2:
    headings: dict[str, list] = {}
    for start in START_EXAMPLES.values():  # the plug-ins' starts (bertgeom.extensions.register_start_example)
        if start.model_id in REGISTRY:
            headings.setdefault(start.heading, []).append(start)
    for heading, starts in headings.items():
        st.markdown(f"**{heading}**")
        for k, start in enumerate(starts):
            if st.button(start.label, on_click=_use_example, args=(start.model_id, start.index),
                         key=f"w_home_{start.model_id}_{k}"):
                st.switch_page("app_pages/attention_heads.py" if start.page == "heads"
                               else registered_page(start.page).script)
    st.markdown("Or pick a model and an input in the sidebar. The *Share this view* box there gives a "
                "link that reopens the same page, model, layer, head, colour and θ, with the input when it fits "
                "in a link (an example, or a short text); otherwise it says so.")

st.subheader("Models")
for spec in REGISTRY.values():
    st.markdown(f"* **{spec.display_name}** — {spec.description} *Licence: {spec.licence}.*")
