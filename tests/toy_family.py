"""A second, tiny model family for the tests: a random BERT classifier over a four-letter alphabet
whose tokens fall into two domains ("head": the first half of the input, "tail": the second).

It plugs into bertgeom the way any family does, explicitly: a loader, an input kind (encoder,
examples, shipped set, class names, token domains) and a registry entry. Nothing in the generic
layers knows about it; the tests check that every page serves it.
"""

from __future__ import annotations

import numpy as np

from bertgeom.inputs import INPUT_KINDS, EncodedInput, Example, InputError, InputItem, InputKind, KindWords
from bertgeom.models import REGISTRY, LoadedModel, ModelSpec, build_tiny_random_bert, finish_loading, register_loader
from bertgeom.tokens import TokenList

ALPHABET = "wxyz"
SPECIALS = ("[PAD]", "[CLS]", "[SEP]")
VOCAB = SPECIALS + tuple(ALPHABET)
CLASSES = ("calm", "busy")
DOMAINS = ("head", "tail")
MODEL_ID = "toy-letters"
KIND_NAME = "letters"


def encode_letters(loaded: LoadedModel, text: str) -> EncodedInput:
    """``[CLS] letter ... letter [SEP]``; the first half of the letters lie in "head", the rest in "tail"."""
    letters = "".join(ch for ch in (text or "").strip().lower() if not ch.isspace())
    if not letters:
        raise InputError("The input is empty: type some of the letters w, x, y, z.")
    bad = sorted(set(letters) - set(ALPHABET))
    if bad:
        raise InputError(f"The letters {', '.join(bad)} are not in the alphabet {ALPHABET}.")
    tokens = ["[CLS]", *letters, "[SEP]"]
    ids = np.array([VOCAB.index(t) for t in tokens], dtype=np.int64)
    n = len(tokens)
    spans = np.array([(-1, -1)] + [(i, i + 1) for i in range(len(letters))] + [(-1, -1)], dtype=np.int64)
    is_cls = np.zeros(n, bool)
    is_cls[0] = True
    is_sep = np.zeros(n, bool)
    is_sep[-1] = True
    half = (len(letters) + 1) // 2
    domains = [""] + [DOMAINS[0] if i < half else DOMAINS[1] for i in range(len(letters))] + [""]
    return EncodedInput(text.strip(), ids, tokens, spans, "letter", is_cls, is_sep, np.zeros(n, bool),
                        domains=tuple(domains))


def _load(spec: ModelSpec) -> LoadedModel:
    model = finish_loading(build_tiny_random_bert(seed=3, vocab_size=len(VOCAB), layers=2, heads=2, hidden=16,
                                                  num_labels=len(CLASSES)))
    model.config.pad_token_id = 0
    return LoadedModel(spec, model, TokenList(VOCAB), "toy-weights")


def _sequences() -> list[str]:
    rng = np.random.default_rng(0)
    return ["".join(rng.choice(list(ALPHABET), size=int(rng.integers(8, 16)))) for _ in range(6)]


LETTERS = InputKind(
    name=KIND_NAME,
    words=KindWords(
        noun="word",
        plural="words",
        box_label="Letters (w, x, y, z)",
        shipped_set_description="the toy words",
        domain_noun="half of the word",
    ),
    encoder=encode_letters,
    examples=lambda: tuple(Example(s, s, CLASSES[i % 2]) for i, s in enumerate(_sequences()[:3])),
    shipped_set=lambda: tuple(InputItem(f"w{i + 1}", s, CLASSES[i % 2]) for i, s in enumerate(_sequences())),
    demo_set=lambda: tuple(InputItem(f"d{i + 1}", s, CLASSES[i]) for i, s in enumerate(_sequences()[:2])),
    class_names={"calm": "Calm words", "busy": "Busy words"},
    domains=DOMAINS,
    session_key="letters_value",
    link_param="word",
)

SPEC = ModelSpec(id=MODEL_ID, display_name="Toy letters BERT (random)", loader="toy", input_kind=KIND_NAME,
                 labels=CLASSES, description="A random BERT over four letters, for tests.")


def register() -> None:
    """Register the toy family (loader, input kind, model)."""
    register_loader("toy", _load)
    INPUT_KINDS.register(LETTERS)
    REGISTRY.add(SPEC)


def unregister() -> None:
    REGISTRY.remove(MODEL_ID)
    INPUT_KINDS.pop(KIND_NAME, None)
