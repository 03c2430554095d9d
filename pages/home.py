"""Home: what the dashboard shows and how to start, for a newcomer or a class."""

import streamlit as st

from bertgeom.examples import example_sentences
from bertgeom.models import REGISTRY
from bertgeom.ui.state import select_head


def _use_sentence(sentence: str, layer: int = 0, head: int = 0) -> None:
    st.session_state["text_value"] = sentence
    st.session_state["w_text"] = sentence
    if st.session_state.get("model_id") not in REGISTRY or REGISTRY[st.session_state["model_id"]].input_kind != "text":
        st.session_state["model_id"] = "minilm-l6"
    select_head(layer, head)


st.title("bertgeom — the geometry of BERT's attention")
st.markdown(
    """
BERT reads a text (or a genome cut into 12-letter *k-mers*) as a row of **tokens**. In every
layer, each of its **attention heads** lets every token look at the others and mix in what
it finds. bertgeom opens that machinery up:

* **Attention Heads** — every head of the model at a glance. Click a square to see *who
  looks at whom*: some heads look at the previous word, some at the next, some dump their
  attention on the `[CLS]`/`[SEP]` tokens, some spread it everywhere.

The methods follow four papers: Bonino, Ghione & Cirrincione 2025 (*The geometry of BERT*),
Clark et al. 2019 (*What does BERT look at?*), Kovaleva et al. 2019 (*Revealing the dark
secrets of BERT*) and Guan et al. 2020 (*How far does BERT look at?*). Where a paper's exact
definition could not be recovered, the page says so and lets you move the thresholds.
"""
)

st.subheader("Start here")
c1, c2 = st.columns(2)
with c1:
    st.markdown("**1 · Pick a model and an input** in the sidebar (or use a button below).")
    st.markdown("**2 · Open a page** in the navigation on the left.")
    st.markdown("**3 · Share what you see**: the address bar keeps the model, layer and head.")
with c2:
    sentences = example_sentences()
    if st.button(f"Example: “{sentences[0]}”", on_click=_use_sentence, args=(sentences[0], 0, 0)):
        st.switch_page("pages/attention_heads.py")
    if st.button(f"Example: “{sentences[2]}”", on_click=_use_sentence, args=(sentences[2], 1, 2)):
        st.switch_page("pages/attention_heads.py")

st.subheader("Models")
for spec in REGISTRY.values():
    st.markdown(f"* **{spec.display_name}** — {spec.description} *Licence: {spec.licence}.*")

with st.expander("For teachers: a 10-minute tour"):
    st.markdown(
        """
1. Load the example sentence and open **Attention Heads**. Colour the grid by *previous-token
   mass*: the bright squares are heads that copy information from the word before.
2. Click one. In its heatmap each row is a word asking *where should I look?*; the bright
   cells just left of the diagonal are the answer.
3. Colour by *[SEP] mass*: many heads in the middle layers park their attention on `[SEP]`,
   a "no-op" that Clark et al. (2019) first described.
4. Raise the threshold slider (θ) to keep only the strong links (the 2025 paper uses θ = 0.3).
"""
    )
