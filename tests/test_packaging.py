"""bertgeom installs as a package: pyproject.toml and the README's requirements files ask for the
same things, the package data the code reads is declared, and the console script exists."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def requirement_lines(name: str) -> list[str]:
    lines = [ln.split("#", 1)[0].strip() for ln in (ROOT / name).read_text(encoding="utf-8").splitlines()]
    return [ln for ln in lines if ln]


def test_runtime_requirements_are_the_same_in_both_places():
    req = requirement_lines("requirements.txt")
    # no path inside: pip reads it from the current folder, which breaks the set-up from a clone's parent
    # folder; the README's command installs bertgeom itself (-e .)
    assert not any(r.startswith(("-e", ".", "/")) for r in req)
    assert sorted(req) == sorted(PYPROJECT["project"]["dependencies"])
    assert "torch==2.13.0" in req  # pinned: a range may pull a multi-GB CUDA build
    assert not any(r.startswith("statsmodels") for r in req)  # only the tests use it


def test_the_extras_match_the_cluster_and_dev_requirements():
    extras = PYPROJECT["project"]["optional-dependencies"]
    cluster = [r for r in requirement_lines("requirements-cluster.txt") if not r.startswith("-r")]
    assert sorted(extras["cluster"]) == sorted(cluster)
    dev = [r for r in requirement_lines("requirements-dev.txt") if not r.startswith("-r")]
    assert sorted(r for r in extras["dev"] if not r.startswith("bertgeom[")) == sorted(dev)


def test_the_package_data_covers_every_data_file():
    patterns = PYPROJECT["tool"]["setuptools"]["package-data"]["bertgeom"]
    pkg = ROOT / "bertgeom"
    data = [p for p in (pkg / "data").rglob("*") if p.is_file()] + list((pkg / "ui" / "texts").glob("*"))
    assert data
    declared = {p for pattern in patterns for p in pkg.glob(pattern) if p.is_file()}  # setuptools' glob rules
    assert set(data) <= declared, sorted(str(p.relative_to(pkg)) for p in set(data) - declared)


def test_the_console_script_is_the_cli():
    # run(): main() with Ctrl+C at any point answered in one sentence (issue 33, item 13)
    assert PYPROJECT["project"]["scripts"]["bertgeom"] == "bertgeom.__main__:run"
    from bertgeom.__main__ import run

    assert run(["models"]) == 0


def test_floors_are_past_the_published_advisories_and_installed_here():
    """Issue 33, item 14: streamlit < 1.54 and transformers < 5.5 have published advisories, so the
    floors exclude them; the versions installed here satisfy the floors (they exist and install)."""
    from importlib.metadata import version

    from packaging.requirements import Requirement
    from packaging.version import Version

    floors = {"streamlit": Version("1.54"), "transformers": Version("5.5")}
    for line in requirement_lines("requirements.txt"):
        req = Requirement(line)
        if req.name in floors:
            lowest = min(Version(s.version) for s in req.specifier if s.operator == ">=")
            assert lowest >= floors[req.name], line
            assert req.specifier.contains(version(req.name)), (line, version(req.name))
            floors.pop(req.name)
    assert not floors, f"not in requirements.txt: {floors}"


def test_streamlit_stops_before_a_minor_release_the_suite_has_not_run_on():
    """Issue 47: Streamlit removes deprecated calls in minor releases (``st.components.v1.html`` after
    2026-06-01), so ``<2`` would install one that removed what the app calls. The range starts where the
    head view's ``st.iframe`` exists and stops before a minor release, and holds the installed version."""
    from importlib.metadata import version

    from packaging.requirements import Requirement
    from packaging.version import Version

    for line in (requirement_lines("requirements.txt"), PYPROJECT["project"]["dependencies"]):
        req = next(Requirement(r) for r in line if Requirement(r).name == "streamlit")
        caps = [Version(s.version) for s in req.specifier if s.operator == "<"]
        floors = [Version(s.version) for s in req.specifier if s.operator == ">="]
        assert caps and floors and min(floors) >= Version("1.56"), req
        cap = min(caps)
        assert cap.major == 1 and cap.micro == 0 and cap.minor > min(floors).minor, req  # a minor, not <2
        installed = Version(version("streamlit"))
        assert req.specifier.contains(installed), (req, installed)


def test_round_four_floors_exclude_the_published_advisories():
    """Issue 46, item 7: transformers < 5.10 (CVE-2026-9856), scikit-learn < 1.5 (CVE-2024-5206),
    onnx < 1.21 (the ``fast`` extra: advisories fixed in 1.16, 1.17 and 1.21), and the starlette <
    1.0.1 and python-multipart < 0.0.27 that Streamlit's own ranges admit are excluded in both
    requirement lists; what is installed here satisfies them."""
    from importlib.metadata import PackageNotFoundError, version

    from packaging.requirements import Requirement
    from packaging.version import Version

    floors = {"transformers": "5.10.0", "scikit-learn": "1.5.0", "starlette": "1.0.1", "python-multipart": "0.0.27"}
    for lines in (requirement_lines("requirements.txt"), PYPROJECT["project"]["dependencies"]):
        reqs = {Requirement(r).name: Requirement(r) for r in lines}
        for name, floor in floors.items():
            assert name in reqs, f"{name} has no floor"
            lowest = min(Version(s.version) for s in reqs[name].specifier if s.operator == ">=")
            assert lowest >= Version(floor), reqs[name]
            assert reqs[name].specifier.contains(version(name)), (reqs[name], version(name))
    onnx = next(Requirement(r) for r in PYPROJECT["project"]["optional-dependencies"]["fast"]
                if Requirement(r).name == "onnx")
    assert min(Version(s.version) for s in onnx.specifier if s.operator == ">=") >= Version("1.21")
    try:
        assert onnx.specifier.contains(version("onnx"))
    except PackageNotFoundError:  # the fast extra is optional
        pass
