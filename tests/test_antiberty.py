"""A real pretrained protein encoder a researcher would bring (issue 43): AntiBERTy 0.1.3 (Ruffolo et al.
2021, arXiv 2112.07782), an 8-layer x 8-head BERT trained on 558 M antibody sequences, installed from
PyPI (requirements-dev.txt). Its wheel ships a PyTorch ``.bin``; bertgeom reads safetensors only, so
the test converts it once (``torch.load(weights_only=True)``: tensors only, no code) into a folder as
a user would, then loads that folder the way the sidebar's custom-model box does: the engine's
attentions equal the model's own forward, the masked-residue head reads a conserved cysteine, and
every page opens on it.

References: Ruffolo, Gray, Sulam (2021), "Deciphering antibody affinity maturation with language
models and weakly supervised learning", arXiv 2112.07782 (its description of the model and vocabulary)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
from antiberty_folder import shipped_dir, write_antiberty_folder  # noqa: E402

APP = str(Path(__file__).resolve().parent.parent / "app.py")
# the heavy chain of trastuzumab's Fv (DrugBank DB00072), residues spaced as AntiBERTy's vocabulary reads them
HEAVY = ("EVQLVESGGGLVQPGGSLRLSCAASGFNIKDTYIHWVRQAPGKGLEWVARIYPTNGYTRYADSVKGRFTISADTSKNTAYLQMNSLRAEDTAVYYC"
         "SRWGGDGFYAMDYWGQGTLVTVSS")
SPACED = " ".join(HEAVY)

pytestmark = pytest.mark.skipif(shipped_dir() is None,
                                reason="antiberty==0.1.3 is not installed (requirements-dev.txt)")


@pytest.fixture(scope="module")
def antiberty_dir(tmp_path_factory) -> Path:
    """AntiBERTy's shipped weights as a safetensors BERT folder with its own 25-token vocabulary."""
    out = write_antiberty_folder(tmp_path_factory.mktemp("antiberty"))
    assert (out / "model.safetensors").exists() and not list(out.glob("*.bin"))
    return out


def test_antiberty_loads_and_the_engine_reads_its_own_forward(antiberty_dir):
    import torch
    from transformers import BertForMaskedLM

    import bertgeom as bg

    loaded = bg.load_model(str(antiberty_dir))
    tr = bg.trace(loaded, SPACED)
    assert tr.attentions.shape == (8, 8, len(HEAVY) + 2, len(HEAVY) + 2)  # one token per residue + [CLS] [SEP]
    assert tr.tokens[1:4] == ["E", "V", "Q"]
    own = BertForMaskedLM.from_pretrained(antiberty_dir, attn_implementation="eager").eval()
    ids = loaded.tokenizer(SPACED, return_tensors="pt")
    with torch.no_grad():
        ref = own(**ids, output_attentions=True, output_hidden_states=True)
    assert np.abs(tr.attentions - torch.stack(ref.attentions)[:, 0].numpy()).max() <= 1e-5
    assert np.abs(tr.hidden_states - torch.stack(ref.hidden_states)[:, 0].numpy()).max() <= 1e-4

    # the masked-residue head (real weights, real behaviour): the cysteine of VH's conserved disulphide
    # (C22, Kabat H22) is read back from its context
    at = HEAVY.index("SCAAS") + 1
    masked = ids["input_ids"].clone()
    masked[0, at + 1] = loaded.tokenizer.mask_token_id
    with torch.no_grad():
        logits = own(input_ids=masked, attention_mask=ids["attention_mask"]).logits[0, at + 1]
    assert loaded.tokenizer.convert_ids_to_tokens(int(logits.argmax())) == "C"


def test_every_page_opens_on_antiberty(antiberty_dir, monkeypatch):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("BERTGEOM_ALLOW_CUSTOM_MODELS", "1")
    failures = {}
    for page in ("app_pages/attention_heads.py", "app_pages/subspace_directions.py", "app_pages/cone_index.py"):
        at = AppTest.from_file(APP, default_timeout=600)
        at.session_state["model_id"] = str(antiberty_dir)
        at.session_state["text_value"] = SPACED
        at.run()
        at.switch_page(page).run()
        errors = [e.message for e in at.exception] + [e.value for e in at.error]
        if errors or not at.markdown:
            failures[page] = errors or ["nothing drawn"]
    assert failures == {}


def test_gradient_importance_on_antiberty_says_its_masked_word_head_is_not_loaded(antiberty_dir, monkeypatch):
    """AntiBERTy's checkpoint ships a masked-word head that bertgeom does not load (it reads the bare
    encoder): both parts of the tab say so, and neither says it has none or names another model."""
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("BERTGEOM_ALLOW_CUSTOM_MODELS", "1")
    at = AppTest.from_file(APP, default_timeout=600)
    at.session_state["model_id"] = str(antiberty_dir)
    at.session_state["text_value"] = SPACED
    at.session_state["heads_tab"] = "Gradient importance"
    at.run()
    at.switch_page("app_pages/attention_heads.py").run()
    assert not at.exception and not at.error, [e.value for e in (*at.exception, *at.error)]
    said = "\n".join([c.value for c in at.caption] + [i.value for i in at.info])
    assert "its checkpoint ships a masked-word head, which bertgeom does not load" in said  # |dL/dα|: no classifier
    assert "this checkpoint's masked-LM head is not loaded here" in said  # head importance's stand-in
    assert "ships no masked-LM head" not in said and "no masked-word head" not in said
    assert "MiniLM" not in said
