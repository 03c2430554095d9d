"""Nothing corrupted, round three (issue 33, items 6-13): the probes of the issue, rerun as written.

Each test runs the real ``python -m bertgeom`` on real files (the tiny random variant model), or
the real lock classes; each failed on the code before the issue. The command runs in this process
(tests/cli_run.py: its entry point, output and exit status, without a 5-8 s start) unless another
process or a signal is part of the probe: then it is a process of its own. Ctrl+C is sent once the process
has shown, on its own standard error, that it is inside start-up (``-X importtime`` names every
module as its import finishes), never after a sleep."""

from __future__ import annotations

import csv
import gzip
import json
import os
import re
import signal
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from cli_run import bertgeom_cli

from bertgeom.sars_cov_2.genome.dataset import load_demo_genomes


def _bertgeom(*args):
    """``python -m bertgeom ARGS``, in this process (tests/cli_run.py)."""
    return bertgeom_cli(*args)


def _bertgeom_process(*args):
    """``python -m bertgeom ARGS`` as a process of its own: for what another process does to it."""
    return subprocess.run([sys.executable, "-m", "bertgeom", *map(str, args)], capture_output=True, text=True,
                          timeout=600, check=False)


def _classify(*args):
    return _bertgeom("classify", *args)


@pytest.fixture(scope="module")
def demo():
    return [r for r, _ in load_demo_genomes()][:4]


def _fasta(records) -> str:
    return "".join(f">{r.name}\n{r.sequence}\n" for r in records)


def _rows(path: Path) -> list[list[str]]:
    with path.open(newline="") as fh:
        return list(csv.reader(fh))


# ---- item 6: one run per OUT -----------------------------------------------------------------
def test_a_second_run_on_the_same_out_names_the_first_and_exits_4(tiny_variant_dir, tmp_path, demo):
    from bertgeom.safety import output_lock

    fasta = tmp_path / "in.fasta"
    fasta.write_text(_fasta(demo[:1]))
    out = tmp_path / "out.csv"
    out.write_text("previous results\n")
    with output_lock(out):  # held as the first run holds it, for its whole life (another process)
        r = _bertgeom_process("classify", fasta, "--model", tiny_variant_dir, "--out", out)
    assert r.returncode == 4 and "Traceback" not in r.stderr and r.stderr.count("\n") == 1
    assert f"is being written by PID {os.getpid()}" in r.stderr
    assert out.read_text() == "previous results\n" and not list(tmp_path.glob("out.csv*.partial"))
    r = _classify(fasta, "--model", tiny_variant_dir, "--out", out)  # released: the next run writes
    assert r.returncode == 0 and len(_rows(out)) == 2 and not (tmp_path / "out.csv.lock").exists()


def test_two_runs_at_once_never_leave_a_mixed_out_reported_as_success(tiny_variant_dir, tmp_path, demo):
    fasta = tmp_path / "in.fasta"
    fasta.write_text(_fasta(demo * 3))
    out = tmp_path / "out.csv"
    cmd = [sys.executable, "-m", "bertgeom", "classify", str(fasta), "--model", str(tiny_variant_dir),
           "--out", str(out)]
    runs = [subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = [(p.communicate(timeout=600)[1], p.returncode)[::-1] for p in runs]
    codes = sorted(rc for rc, _ in results)
    assert codes in ([0, 0], [0, 4]), results  # one after the other, or the second told to wait its turn
    rows = _rows(out)
    assert len(rows) == 1 + len(demo) * 3 and len({len(r) for r in rows}) == 1
    assert not list(tmp_path.glob("out.csv*.partial")) and not (tmp_path / "out.csv.lock").exists()


# ---- items 7, 8: links are never followed -----------------------------------------------------
def test_a_planted_partial_link_is_never_followed(tiny_variant_dir, tmp_path, demo):
    fasta = tmp_path / "in.fasta"
    fasta.write_text(_fasta(demo[:1]))
    precious = tmp_path / "precious.txt"
    precious.write_text("someone else's file\n")
    out = tmp_path / "out.csv"
    (tmp_path / "out.csv.partial").symlink_to(precious)  # the old fixed name
    r = _classify(fasta, "--model", tiny_variant_dir, "--out", out)
    assert r.returncode == 0, r.stderr
    assert precious.read_text() == "someone else's file\n"
    assert not out.is_symlink() and len(_rows(out)) == 2


def test_a_planted_lock_link_is_refused_in_one_sentence(tiny_variant_dir, tmp_path, demo):
    fasta = tmp_path / "in.fasta"
    fasta.write_text(_fasta(demo[:1]))
    precious = tmp_path / "precious.txt"
    precious.write_text("someone else's file\n")
    out = tmp_path / "out.csv"
    (tmp_path / "out.csv.lock").symlink_to(precious)
    r = _classify(fasta, "--model", tiny_variant_dir, "--out", out)
    assert r.returncode == 4 and "symbolic link" in r.stderr and "Traceback" not in r.stderr
    assert precious.read_text() == "someone else's file\n" and not out.exists()


def test_a_precompute_lock_link_is_refused_and_never_written(tmp_path):
    from bertgeom.precompute.core import PrecomputeOutputError
    from bertgeom.precompute.lock import RunLock

    out = tmp_path / "results"
    out.mkdir()
    precious = tmp_path / "precious.txt"
    precious.write_text("someone else's file\n")
    (out / "precompute.lock").symlink_to(precious)
    with pytest.raises(PrecomputeOutputError, match="symbolic link"):
        RunLock(out).acquire()
    assert precious.read_text() == "someone else's file\n" and (out / "precompute.lock").is_symlink()


def test_the_prepared_sets_lock_link_is_refused_and_never_written(tmp_path, monkeypatch):
    from bertgeom.sets.prepared import prepare_models, prepared_dir

    monkeypatch.setenv("BERTGEOM_CACHE_DIR", str(tmp_path / "cache"))
    prepared_dir().mkdir(parents=True)
    precious = tmp_path / "precious.txt"
    precious.write_text("someone else's file\n")
    (prepared_dir() / "lock").symlink_to(precious)
    said: list[str] = []
    assert prepare_models(["tiny-random"], log=said.append) == 2
    assert "never followed" in said[0] and precious.read_text() == "someone else's file\n"


# ---- items 9-12: every read path in one handler ----------------------------------------------
def test_a_gz_cut_inside_a_header_over_64_kib_exits_2_and_keeps_the_first_record(tiny_variant_dir, tmp_path, demo):
    long_header = os.urandom(100_000).hex()  # incompressible: the cut lands inside it
    text = (_fasta(demo[:1]) + f">{long_header}\n{demo[1].sequence}\n").encode()
    blob = gzip.compress(text)
    cut = blob[: len(blob) * 3 // 4]
    start = len(_fasta(demo[:1])) + 1 + (1 << 16)  # past the first 64 KiB piece of the header
    got = _decompressed_prefix(cut)
    assert start < got < start + len(long_header) - (1 << 16)
    path = tmp_path / "cut.fasta.gz"
    path.write_bytes(cut)
    out = tmp_path / "out.csv"
    out.write_text("previous results\n")
    r = _classify(path, "--model", tiny_variant_dir, "--out", out)
    assert r.returncode == 2 and "Traceback" not in r.stderr and "truncated" in r.stderr, r.stderr
    assert out.read_text() == "previous results\n"
    (partial,) = tmp_path.glob("out.csv.*.partial")
    rows = list(csv.DictReader(partial.open()))
    assert rows[0]["name"] == demo[0].name and rows[0]["predicted"] and "truncated" in rows[-1]["error"]


def _decompressed_prefix(blob: bytes) -> int:
    """How many bytes a cut gzip stream decompresses to."""
    import zlib

    return len(zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(blob))


def test_evaluate_refuses_a_truncated_gz_and_leaves_json(tiny_variant_dir, tmp_path, demo):
    blob = gzip.compress(_fasta(demo).encode())
    path = tmp_path / "cut.fasta.gz"
    path.write_bytes(blob[: len(blob) * 2 // 3])
    labels = tmp_path / "labels.tsv"
    labels.write_text("name\tlabel\n" + "".join(f"{r.name}\tomicron\n" for r in demo))
    report = tmp_path / "report.json"
    report.write_text('{"previous": true}')
    r = _bertgeom("evaluate", path, labels, "--model", tiny_variant_dir, "--no-baseline", "--json", report)
    assert r.returncode == 2 and "Traceback" not in r.stderr and "truncated" in r.stderr, r.stderr
    assert "left as it was" in r.stderr and json.loads(report.read_text()) == {"previous": True}
    assert "accuracy" not in r.stdout.lower()


def test_evaluate_on_a_binary_labels_file_says_so_in_one_sentence(tiny_variant_dir, tmp_path, demo):
    fasta = tmp_path / "in.fasta"
    fasta.write_text(_fasta(demo[:1]))
    labels = tmp_path / "labels.tsv"
    labels.write_bytes(os.urandom(4096) + b"\xff\xfe\x00")
    r = _bertgeom("evaluate", fasta, labels, "--model", tiny_variant_dir, "--no-baseline")
    assert r.returncode == 2 and "Traceback" not in r.stderr and "not a UTF-8 text TSV" in r.stderr, r.stderr
    assert r.stderr.count("error:") == 1


@pytest.mark.parametrize("kind", ["zip", "random", "nul"])
def test_a_file_with_no_sequence_record_exits_2_and_keeps_out(tiny_variant_dir, tmp_path, demo, kind):
    path = tmp_path / f"in.{kind}"
    if kind == "zip":
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr("genomes.fasta", _fasta(demo[:2]))
    elif kind == "random":
        path.write_bytes(os.urandom(1 << 20))
    else:
        path.write_bytes(b"\x00" * 100_000)
    out = tmp_path / "out.csv"
    out.write_text("previous results\n")
    r = _classify(path, "--model", tiny_variant_dir, "--out", out)
    assert r.returncode == 2 and "Traceback" not in r.stderr and r.stderr.count("error:") == 1, r.stderr
    assert out.read_text() == "previous results\n"
    if kind == "zip":
        assert "zip archive" in r.stderr


def _flip_crc(member: bytes) -> bytes:
    """A gzip member whose data decodes but whose CRC-32 (bytes -8..-4) is wrong."""
    return member[:-8] + bytes([member[-8] ^ 0xFF]) + member[-7:]


def test_rows_from_a_gzip_member_whose_check_fails_are_not_kept(tiny_variant_dir, tmp_path, demo):
    # one member per record (as BGZF): members 1 and 2 verify, member 3's CRC-32 fails
    members = [gzip.compress(f">{r.name}\n{r.sequence}\n".encode()) for r in demo]
    path = tmp_path / "damaged.fasta.gz"
    path.write_bytes(members[0] + members[1] + _flip_crc(members[2]) + members[3])
    out = tmp_path / "out.csv"
    out.write_text("previous results\n")
    r = _classify(path, "--model", tiny_variant_dir, "--out", out)
    assert r.returncode == 2 and "damaged" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert out.read_text() == "previous results\n"
    (partial,) = tmp_path.glob("out.csv.*.partial")
    rows = list(csv.DictReader(partial.open()))
    # record 2 may go on in member 3 (BGZF cuts anywhere): it is the record reading stopped in
    assert [row["name"] for row in rows] == [demo[0].name, demo[1].name] and rows[0]["predicted"]
    assert "damaged" in rows[1]["error"] and not rows[1]["predicted"]
    assert f"reading stopped inside record '{demo[1].name}'; 1 record before it was verified" in rows[1]["error"]

    # one member for the whole file: nothing is verified before its end, so no row is kept
    path.write_bytes(_flip_crc(gzip.compress(_fasta(demo).encode())))
    for p in tmp_path.glob("out.csv.*.partial"):
        p.unlink()
    r = _classify(path, "--model", tiny_variant_dir, "--out", out)
    assert r.returncode == 2 and "damaged" in r.stderr
    assert re.search(r"the last \d records read came from data whose check did not pass and are not kept; "
                     r"0 records before them were verified", r.stderr), r.stderr
    (partial,) = tmp_path.glob("out.csv.*.partial")
    rows = list(csv.DictReader(partial.open()))
    assert len(rows) == 1 and rows[0]["error"] and not rows[0]["predicted"]  # the error's row only
    assert "0 verified rows" in r.stderr and out.read_text() == "previous results\n"


# ---- item 13: Ctrl+C during start-up -----------------------------------------------------------
def _interrupt_during_start_up(args: list[str], env: dict) -> tuple[int, str]:
    """Start ``python -X importtime -m bertgeom ARGS``, send SIGINT once torch has been imported
    (start-up: the model is not loaded yet), and return the exit status and the non-import lines."""
    # SIGINT as a terminal sends it (a suite run in a shell's background inherits it ignored)
    proc = subprocess.Popen([sys.executable, "-X", "importtime", "-m", "bertgeom", *args], stderr=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, text=True, env=env,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        other: list[str] = []
        for line in proc.stderr:
            if not line.startswith("import time:"):
                other.append(line)
            elif re.search(r"\|\s+torch$", line.rstrip()):
                proc.send_signal(signal.SIGINT)
                break
        else:
            proc.wait(timeout=60)
            pytest.fail("the command ended before importing torch: " + "".join(other))
        other += [ln for ln in proc.stderr if not ln.startswith("import time:")]
        return proc.wait(timeout=300), "".join(other)
    finally:
        proc.kill()


@pytest.mark.parametrize("command", ["classify", "prepare-sets"])
def test_ctrl_c_during_start_up_is_one_sentence(tiny_variant_dir, tmp_path, demo, command):
    env = {**os.environ, "BERTGEOM_CACHE_DIR": str(tmp_path / "cache")}
    if command == "classify":
        fasta = tmp_path / "in.fasta"
        fasta.write_text(_fasta(demo[:1]))
        args = ["classify", str(fasta), "--model", str(tiny_variant_dir), "--out", str(tmp_path / "out.csv")]
    else:
        args = ["prepare-sets", "--no-subspace", "--no-sweeps"]
    rc, err = _interrupt_during_start_up(args, env)
    assert rc == 130 and "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert err.strip().count("\n") == 0 and "interrupted" in err


# The ~0.1 s before the CLI's run(): the package's own imports and bertgeom.__main__'s. A
# sitecustomize (run by the child's interpreter before -m finds its module) holds the start-up at one
# import, says so on stderr and waits on stdin, which the test never writes: SIGINT is sent on that
# line, so it surely lands inside the window, however busy the machine.
_HOLD_AT_IMPORT = '''
import os, sys

class _Hold:
    def find_spec(self, name, path=None, target=None):
        if name == os.environ["HOLD_AT"]:
            sys.meta_path.remove(self)
            sys.stderr.write("held at " + name + "\\n")
            sys.stderr.flush()
            sys.stdin.read()  # never written: only a signal ends the wait
        return None

sys.meta_path.insert(0, _Hold())
'''


@pytest.mark.parametrize("hold_at", ["bertgeom.version", "bertgeom.models", "bertgeom.trace", "bertgeom.__main__"])
def test_ctrl_c_in_the_imports_before_the_cli_runs_is_one_sentence(tmp_path, hold_at):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(_HOLD_AT_IMPORT)
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "HOLD_AT": hold_at, "PYTHONPATH": os.pathsep.join([str(site), str(root)])}
    proc = subprocess.Popen([sys.executable, "-m", "bertgeom", "models"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        line = proc.stderr.readline()  # the event: the child is inside that import
        assert line == f"held at {hold_at}\n", line + proc.stderr.read()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=300)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert err == "interrupted (Ctrl+C).\n" and not out, err
