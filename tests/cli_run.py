"""``python -m bertgeom ARGS`` run inside the test process, for the CLI tests whose subject is what a
command does (its output, exit status, the files it writes or keeps), not the process boundary.

Each ``python -m bertgeom`` started as a subprocess paid 5-8 s of torch and transformers imports on
a 2-core machine; here the commands share the suite's imports. What a real start would show is kept:
the real entry point (:func:`bertgeom.__main__.run`, the console script's); its standard output and
error as ``subprocess.run(..., text=True)`` decodes them (universal newlines); ``SystemExit`` turned
into its exit status, any other exception into the interpreter's ``Traceback`` on standard error
and status 1. Python warnings are shown under the
interpreter's default filters, in their place on standard error, and log records of handlers that
write to the suite's standard error land there too, so a stray warning still breaks a test that
wants one sentence. The tests that need a real process (signals, two processes at once, a lock
held by another process, what starting the CLI imports) keep ``subprocess``.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import sys
import traceback
import warnings
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class CliResult:
    """What ``subprocess.run(..., capture_output=True, text=True)`` gives back, as far as the tests read it."""

    returncode: int
    stdout: str
    stderr: str


#: Python's default warning filters (``python -W`` unset, not a development build): shown once per place.
_DEFAULT_IGNORED = (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning)


def _exit_status(exc: SystemExit, err: io.StringIO) -> int:
    """The status the interpreter exits with for ``SystemExit(code)``: None 0, an int itself, else
    the code printed on standard error and 1."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    print(exc.code, file=err)
    return 1


@contextlib.contextmanager
def _stderr_handlers(err: io.StringIO):
    """Log handlers bound to the suite's standard error (transformers binds its own when first used)
    write to ``err`` inside the block, as a fresh process's would write to its standard error."""
    loggers = [logging.getLogger()] + [lg for lg in logging.Logger.manager.loggerDict.values()
                                       if isinstance(lg, logging.Logger)]
    standard = {id(s) for s in (sys.stderr, sys.__stderr__) if s is not None}
    moved = []
    for lg in loggers:
        for h in lg.handlers:
            if type(h) is logging.StreamHandler and id(h.stream) in standard:
                moved.append((h, h.setStream(err)))
    try:
        yield
    finally:
        for h, old in moved:
            h.setStream(old)


def bertgeom_cli(*args, cwd: str | os.PathLike | None = None, env: dict[str, str] | None = None) -> CliResult:
    """Run ``python -m bertgeom ARGS`` in this process (``cwd``: its working folder; ``env``: variables
    set for the run only) and return its exit status, standard output and standard error."""
    from bertgeom.__main__ import run

    out, err = io.StringIO(), io.StringIO()
    saved_env = {k: os.environ.get(k) for k in (env or {})}
    with contextlib.ExitStack() as stack:
        if cwd is not None:
            stack.enter_context(contextlib.chdir(Path(cwd)))
        os.environ.update(env or {})
        stack.callback(_restore_env, saved_env)
        stack.enter_context(warnings.catch_warnings())
        warnings.resetwarnings()
        warnings.simplefilter("default")
        for category in _DEFAULT_IGNORED:
            warnings.simplefilter("ignore", category)
        warnings.showwarning = lambda message, category, filename, lineno, file=None, line=None: err.write(
            warnings.formatwarning(message, category, filename, lineno, line))
        stack.enter_context(_stderr_handlers(err))
        stack.enter_context(contextlib.redirect_stdout(out))
        stack.enter_context(contextlib.redirect_stderr(err))
        try:
            code = run([str(a) for a in args])
        except SystemExit as exc:
            code = _exit_status(exc, err)
        except Exception:  # what the interpreter prints for an uncaught exception, and its status
            traceback.print_exc(file=err)
            code = 1
    return CliResult(int(code), _text(out.getvalue()), _text(err.getvalue()))


def _text(raw: str) -> str:
    """A captured stream as ``subprocess.run(..., text=True)`` decodes it: universal newlines, so a
    progress bar's carriage returns and the CSV writer's CRLF read as ``\\n``, as they did there."""
    return raw.replace("\r\n", "\n").replace("\r", "\n")


def _restore_env(saved: dict[str, str | None]) -> None:
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
