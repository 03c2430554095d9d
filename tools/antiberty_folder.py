"""AntiBERTy 0.1.3's pretrained weights (the PyPI wheel ships a PyTorch ``.bin``) as a safetensors BERT
folder bertgeom loads like a user's own model: for tests/test_antiberty.py and bench/bench_faithful_per_head.py.

The ``.bin`` is read with ``torch.load(weights_only=True)`` (tensors only, no code from the file); the
species, chain and graft heads and the pooler, which its masked-residue model does not use, are left out.

Usage: ``python tools/antiberty_folder.py OUT_DIR`` (needs ``pip install antiberty==0.1.3``).

References: Ruffolo, Gray, Sulam (2021), "Deciphering antibody affinity maturation with language models
and weakly supervised learning", arXiv 2112.07782.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path


def shipped_dir() -> Path | None:
    """The wheel's ``trained_models`` folder, found without running the package's own code; None when
    antiberty is not installed."""
    spec = importlib.util.find_spec("antiberty")
    return None if spec is None else Path(spec.submodule_search_locations[0]) / "trained_models"


def write_antiberty_folder(out: Path) -> Path:
    """Write AntiBERTy as ``config.json``, ``model.safetensors`` and its 25-token vocabulary into ``out``."""
    import torch
    from transformers import BertConfig, BertForMaskedLM, BertTokenizer

    shipped = shipped_dir()
    if shipped is None:
        raise RuntimeError("antiberty is not installed: pip install antiberty==0.1.3")
    config = json.loads((shipped / "AntiBERTy_md_smooth" / "config.json").read_text())
    config.pop("architectures", None)  # "AntiBERTy": its own class; the encoder and MLM head are BERT's
    state = torch.load(shipped / "AntiBERTy_md_smooth" / "pytorch_model.bin", weights_only=True, map_location="cpu")
    state = {k: v for k, v in state.items()
             if not k.startswith(("cls.species", "cls.chain", "cls.graft", "bert.pooler"))
             and k != "bert.embeddings.position_ids"}
    model = BertForMaskedLM(BertConfig(**config))
    missing, unexpected = model.load_state_dict(state, strict=False)
    if unexpected or not set(missing) <= {"cls.predictions.decoder.bias"}:
        raise RuntimeError(f"AntiBERTy's weights do not fit BERT: missing {missing}, unexpected {unexpected}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    shutil.copy(shipped / "vocab.txt", out / "vocab.txt")
    # from the folder: transformers 5 ignores a ``vocab_file=`` argument and reads every residue as [UNK]
    BertTokenizer.from_pretrained(out, do_lower_case=False).save_pretrained(out)
    return out


if __name__ == "__main__":
    print(write_antiberty_folder(Path(sys.argv[1])))
