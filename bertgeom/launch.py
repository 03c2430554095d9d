"""Start the dashboard from any folder: ``python -m bertgeom app``.

Streamlit reads its settings from ``.streamlit/config.toml`` in the *current* folder only (then the
user's ``~/.streamlit``), never beside the script. Run as ``streamlit run bertgeom/app.py`` from the
folder above a clone, the app would listen on every network interface instead of 127.0.0.1, watch its
files (which torch breaks) and show tracebacks to visitors. The ``app`` command passes the checkout's
settings as Streamlit flags, so they hold wherever it is started; what the user adds after them
(``--server.port 8600``) comes last and wins. The app itself says when it was started without them
(:func:`settings_not_read`).

References: Streamlit's configuration order (defaults, ``~/.streamlit``, ``$CWD/.streamlit``,
environment, flags), ``streamlit.config.get_config_options``.
"""

from __future__ import annotations

import os
import sys
import tomllib
from collections.abc import Callable, Sequence
from pathlib import Path

__all__ = ["app_command", "checkout_root", "read_settings", "register", "setting_text", "settings_flags",
           "settings_not_read"]

#: Settings of the checkout's ``.streamlit/config.toml`` whose absence changes what a visitor can do or
#: see, with the value the checkout sets; the app names the missing ones (:func:`settings_not_read`).
GUARDED_SETTINGS = {"server.address": "127.0.0.1", "server.fileWatcherType": "none",
                    "client.showErrorDetails": "none"}


def checkout_root() -> Path | None:
    """The checkout holding this package, when it also holds the app (``app.py`` and
    ``.streamlit/config.toml`` beside the package folder); None for an installed wheel."""
    root = Path(__file__).resolve().parent.parent
    if (root / "app.py").is_file() and (root / ".streamlit" / "config.toml").is_file():
        return root
    return None


def read_settings(config_toml: Path) -> dict[str, object]:
    """``{"section.option": value}`` (TOML's types) for every option of a Streamlit ``config.toml``."""
    with open(config_toml, "rb") as fh:
        config = tomllib.load(fh)
    return {f"{section}.{option}": value for section, options in config.items() for option, value in options.items()}


def setting_text(value: object) -> str:
    """A setting as Streamlit's flags and environment variables spell it (``true``, ``20``, ``#e4572e``)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def settings_flags(config_toml: Path) -> list[str]:
    """``["--section.option=value", ...]`` for every option of a Streamlit ``config.toml``."""
    return [f"--{name}={setting_text(value)}" for name, value in read_settings(config_toml).items()]


def app_command(extra: Sequence[str] = (), root: Path | None = None) -> list[str]:
    """The command that runs the checkout's app with its settings, then ``extra`` Streamlit flags."""
    root = root or checkout_root()
    if root is None:
        raise FileNotFoundError("The app runs from a checkout of the repository (app.py beside the bertgeom "
                                "package); this bertgeom was installed without it.")
    return [sys.executable, "-m", "streamlit", "run", str(root / "app.py"),
            *settings_flags(root / ".streamlit" / "config.toml"), *extra]


def settings_not_read(get_option: Callable[[str], object]) -> list[str]:
    """The :data:`GUARDED_SETTINGS` that the running server does not have (``get_option``: Streamlit's
    ``st.get_option``): non-empty when it was started outside the checkout without ``app``."""
    return [name for name, value in GUARDED_SETTINGS.items() if str(get_option(name)) != value]


def _cmd_app(args) -> int:
    try:
        command = app_command(args.streamlit_flags)
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.print_command:
        print(" ".join(command))
        return 0
    os.execv(command[0], command)  # the server replaces this process (Ctrl+C goes to Streamlit)
    return 0  # pragma: no cover - execv does not return


def register(sub) -> None:
    """Add ``app`` to the CLI's subcommands."""
    p = sub.add_parser("app", help="run the dashboard, with the checkout's settings, from any folder",
                       description="Runs `streamlit run app.py` with the settings of the checkout's "
                                   ".streamlit/config.toml passed as flags, so they hold from any folder. "
                                   "Streamlit flags given after it come last and win, e.g. "
                                   "`python -m bertgeom app --server.port 8600`.")
    p.add_argument("--print-command", action="store_true", help="print the command instead of running it")
    # every other argument is a Streamlit flag, handed on as given (bertgeom.__main__.main)
    p.set_defaults(func=_cmd_app, streamlit_flags=[], takes_unknown_flags=True)
