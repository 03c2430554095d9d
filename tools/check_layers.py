"""Hold the house's floors: which part of bertgeom may import which, checked from the code's own imports.

Usage: ``python tools/check_layers.py [ROOT]`` (exit 0 when every contract holds, 1 with one line per
breach). CI runs it before the tests (``.ci/run``); ``tests/test_layers.py`` runs it too and plants a
breach of each kind to show that it is caught.

Three contracts, read from every import in a file (module level and inside functions alike; relative
imports resolved against the file's package; imports by a literal string, ``importlib.import_module("x")``
and ``__import__("x")``, counted as ``import x``):

1. **Floors.** Every part of the package sits on a floor (``FLOORS``, ground first); a part imports
   only parts on its own floor or below. ``from bertgeom import attention`` counts as importing
   ``bertgeom.attention``; a bare ``import bertgeom`` is the package's face, on its own floor.
2. **Streamlit only in the UI.** ``streamlit`` is imported only under ``bertgeom/ui/``, ``app_pages/``
   and ``app.py``: the library, the CLI and notebooks never need it.
3. **The case study is a plug-in.** The SARS-CoV-2 case study (``CASE_STUDY``) is imported by no
   generic file. ``PENDING_PLUGIN_EXCEPTIONS`` lists the files that still do, each with the reason;
   the list may only shrink (an entry that no longer imports the case study is reported as stale), so
   no new generic file can start to depend on genomes.

References
----------
The layout and its floors: README.md (Layout) and ``farm-studio look``; the plug-in boundary: issue 35.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

# Ground first. A part is a top-level module of the package (``bertgeom.trace``) or a subpackage
# (``bertgeom.analysis``); ``app`` is app.py and ``app_pages`` the page files.
FLOORS: tuple[frozenset[str], ...] = (
    frozenset({"version", "examples", "metricdocs", "tables", "safety", "runtime", "cache", "tokens",
               "attention", "architectures", "weights", "models", "forward", "probabilities", "launch",
               "sars_cov_2.genome"}),
    frozenset({"analysis", "inputs", "backends", "extensions"}),
    frozenset({"trace", "figures", "subject"}),
    frozenset({"sets", "sars_cov_2.variant", "sars_cov_2"}),
    frozenset({"bertgeom"}),
    frozenset({"precompute"}),
    frozenset({"ui", "__main__", "sars_cov_2.ui"}),
    frozenset({"app", "app_pages", "sars_cov_2.page"}),
)

# Plug-in packages inside bertgeom: each of their subpackages (and the page) is a part of its own,
# named ``plugin.sub`` (``bertgeom/sars_cov_2/genome/fasta.py`` -> ``sars_cov_2.genome``).
PLUGINS = ("sars_cov_2",)

# Parts on one floor that must stay strangers (their own layers are independent views of the model).
FORBIDDEN_PEERS: frozenset[tuple[str, str]] = frozenset({
    ("sets", "sars_cov_2.variant"), ("sars_cov_2.variant", "sets"), ("trace", "figures"), ("figures", "trace"),
})

STREAMLIT_RULE = "Streamlit outside bertgeom/ui/, app_pages/, app.py and a plug-in's ui/ and page"
STREAMLIT_HOMES = ("bertgeom/ui/", "app_pages/", "app.py", "bertgeom/sars_cov_2/ui/", "bertgeom/sars_cov_2/page.py")

# The case study: what is special to SARS-CoV-2 genomes and the variant model.
CASE_STUDY = ("bertgeom/sars_cov_2/",)
CASE_STUDY_MODULES = ("bertgeom.sars_cov_2",)

# Generic files that still import the case study, each with its reason: none left (issue 35); the list may
# only shrink, so a new entry is a step back.
PENDING_PLUGIN_EXCEPTIONS: dict[str, str] = {}


@dataclass(frozen=True)
class Breach:
    """One import that breaks a contract: where, what it imports, and which rule."""

    path: str
    line: int
    imported: str
    rule: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: imports {self.imported}: {self.rule}"


def part_of_file(rel: str) -> str:
    """The part a file belongs to (``bertgeom/analysis/cone.py`` -> ``analysis``, ``app.py`` -> ``app``)."""
    parts = Path(rel).with_suffix("").parts
    if parts[0] != "bertgeom":
        return parts[0]
    if len(parts) == 2:
        return "bertgeom" if parts[1] == "__init__" else parts[1]
    if parts[1] in PLUGINS:
        return parts[1] if parts[2] == "__init__" else f"{parts[1]}.{parts[2]}"
    return parts[1]


def part_of_module(module: str, names: tuple[str, ...] = ()) -> list[str]:
    """The parts an import statement reaches (``from bertgeom import attention`` -> ``attention``)."""
    bits = module.split(".")
    if bits[0] != "bertgeom":
        return []
    if len(bits) > 2 and bits[1] in PLUGINS:
        return [f"{bits[1]}.{bits[2]}"]
    if len(bits) > 1:
        if bits[1] in PLUGINS:
            known = {p for floor in FLOORS for p in floor}
            reached = [f"{bits[1]}.{n}" for n in names if f"{bits[1]}.{n}" in known]
            return reached or [bits[1]]
        return [bits[1]]
    known = {p for floor in FLOORS for p in floor}
    reached = [n for n in names if n in known]
    return reached or ["bertgeom"]


def floor_of(part: str) -> int | None:
    for level, floor in enumerate(FLOORS):
        if part in floor:
            return level
    return None


def python_files(root: Path) -> list[Path]:
    files = [*sorted((root / "bertgeom").rglob("*.py")), *sorted((root / "app_pages").glob("*.py"))]
    if (root / "app.py").exists():
        files.append(root / "app.py")
    return files


def module_of_file(rel: str) -> str:
    """The dotted module a file defines (``bertgeom/sets/heads.py`` -> ``bertgeom.sets.heads``; a package's
    ``__init__.py`` -> the package)."""
    parts = list(Path(rel).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _absolute(name: str, level: int, module: str, is_package: bool) -> str | None:
    """The absolute module of a relative import ``level`` dots up from ``module`` (None when it climbs
    out of the top package)."""
    base = module.split(".") if is_package else module.split(".")[:-1]
    if level - 1 > len(base) - 1:
        return None
    base = base[:len(base) - (level - 1)]
    return ".".join([*base, name] if name else base)


_IMPORTERS = {("importlib", "import_module"), ("", "import_module"), ("", "__import__")}


def _literal(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _string_import(node: ast.Call) -> tuple[str, str | None] | None:
    """``(name, package)`` of ``importlib.import_module("x")``, ``import_module("x", "pkg")`` or
    ``__import__("x")`` called with a literal name; None for any other call."""
    f = node.func
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
        who = (f.value.id, f.attr)
    elif isinstance(f, ast.Name):
        who = ("", f.id)
    else:
        return None
    if who not in _IMPORTERS or not node.args:
        return None
    name = _literal(node.args[0])
    if name is None:
        return None
    package = _literal(node.args[1]) if len(node.args) > 1 and who[1] == "import_module" else None
    package = package or next((_literal(k.value) for k in node.keywords if k.arg == "package"), None)
    return name, package


def imports_of(tree: ast.AST, rel: str = ""):
    """Yield (line, module, imported names) for every import anywhere in the tree (module level and
    inside functions): absolute ones, relative ones resolved against the file ``rel`` (``from .x import
    y`` in ``bertgeom/sars_cov_2/genome/fasta.py`` is ``bertgeom.sars_cov_2.genome.x``), and imports by
    a literal string (``importlib.import_module("bertgeom.trace")``, ``__import__("streamlit")``)."""
    here = module_of_file(rel) if rel else ""
    is_package = rel.endswith("__init__.py")
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, ()
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                if node.module:
                    yield node.lineno, node.module, tuple(a.name for a in node.names)
                continue
            module = _absolute(node.module or "", node.level, here, is_package) if here else None
            if module is None:
                continue
            yield node.lineno, module, tuple(a.name for a in node.names)  # as `from bertgeom.x import a`
        elif isinstance(node, ast.Call):
            found = _string_import(node)
            if found is None:
                continue
            name, package = found
            if name.startswith("."):
                level = len(name) - len(name.lstrip("."))
                if not package:
                    continue
                name = _absolute(name.lstrip("."), level, package, True)
                if name is None:
                    continue
            yield node.lineno, name, ()


def check(root: Path) -> list[Breach | str]:
    """Every breach of the three contracts under ``root`` (empty when the house holds)."""
    breaches: list[Breach | str] = []
    still_needed: set[str] = set()
    for path in python_files(root):
        rel = path.relative_to(root).as_posix()
        source_part = part_of_file(rel)
        source_floor = floor_of(source_part)
        if source_floor is None:
            breaches.append(f"{rel}: part '{source_part}' sits on no floor: add it to FLOORS in tools/check_layers.py")
            continue
        generic = not rel.startswith(CASE_STUDY)
        for line, module, names in imports_of(ast.parse(path.read_text(encoding="utf-8"), rel), rel):
            if module.split(".")[0] == "streamlit" and not rel.startswith(STREAMLIT_HOMES):
                breaches.append(Breach(rel, line, module, STREAMLIT_RULE))
            full = [f"{module}.{n}" for n in names] if module == "bertgeom" else [module]
            if generic and any(m.startswith(CASE_STUDY_MODULES) for m in full):
                if rel in PENDING_PLUGIN_EXCEPTIONS:
                    still_needed.add(rel)
                else:
                    breaches.append(Breach(rel, line, module,
                                          "a generic file imports the case study (bertgeom.sars_cov_2)"))
            for target in part_of_module(module, names):
                if target == source_part:
                    continue
                target_floor = floor_of(target)
                if target_floor is None:
                    breaches.append(Breach(rel, line, module, f"part '{target}' sits on no floor"))
                elif target_floor > source_floor:
                    rule = f"runs up from floor {source_floor} ({source_part}) to {target_floor} ({target})"
                    breaches.append(Breach(rel, line, module, rule))
                elif (source_part, target) in FORBIDDEN_PEERS:
                    breaches.append(Breach(rel, line, module, f"{source_part} and {target} must not import each other"))
    for rel in sorted(set(PENDING_PLUGIN_EXCEPTIONS) - still_needed):
        if (root / rel).exists():
            breaches.append(f"{rel}: no longer imports the case study: remove it from PENDING_PLUGIN_EXCEPTIONS")
    return breaches


def main(argv: list[str]) -> int:
    root = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parent.parent
    breaches = check(root)
    for breach in breaches:
        print(breach)
    if not breaches:
        print(f"layer contracts hold: {len(python_files(root))} files, {len(FLOORS)} floors")
    return 1 if breaches else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
