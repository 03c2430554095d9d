"""What a plug-in adds to the app besides its input kind: pages, one-click starts on the home page,
and guided-tour steps, each a registry the app reads (the navigation, the home page, the tour).

Kept apart from :mod:`bertgeom.inputs` (what an input is and how it is read): these say how the app
offers a kind, not what the kind is. A plug-in registers them from its ``bertgeom.plugins`` entry
point; nothing here imports Streamlit.

References: issue 35 (the case study as a plug-in); issue 47 (registries out of inputs.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from bertgeom.inputs import InputError
from bertgeom.models import PluginRegistry

__all__ = ["PageSpec", "PAGES", "register_page", "registered_page", "registered_pages", "StartExample",
           "START_EXAMPLES", "register_start_example", "TourStep", "TOUR_STEPS", "register_tour_step"]


@dataclass(frozen=True)
class PageSpec:
    """A page a plug-in adds to the app: its key (what :attr:`InputKind.pages` names), the page
    script's path (absolute: the plug-in's own file), where the navigation lists it and how.

    The app lists a registered page only while the chosen model's input kind names its key, so a
    page that cannot work with the model at hand is never offered. ``summary``: one line the home
    page lists under the page's title, beside the core pages' (markdown; "" lists none)."""

    key: str
    title: str
    script: str
    url_path: str
    icon: str = ""
    section: str = "Plug-ins"
    summary: str = ""


#: Pages registered by plug-ins, by key in registration order (:func:`register_page`); the app's
#: navigation reads them.
PAGES = PluginRegistry()


def register_page(page: PageSpec) -> PageSpec:
    """Add ``page`` to the app's navigation, under ``page.section``, for input kinds naming ``page.key``."""
    return PAGES.put(page.key, page)


def registered_page(key: str) -> PageSpec:
    """The registered page ``key`` (:class:`InputError` when no plug-in registered it)."""
    page = PAGES.get(key)
    if page is None:
        raise InputError(f"No plug-in registered a page '{key}'.")
    return page


def registered_pages() -> list[PageSpec]:
    """Every page plug-ins registered, in registration order."""
    return list(PAGES.values())


@dataclass(frozen=True)
class StartExample:
    """A one-click start a plug-in offers on the home page: open ``model_id`` on its input kind's
    example ``index`` on page ``page`` (``"heads"``: Attention Heads; or a registered page's key),
    listed under ``heading`` while the model is installed."""

    heading: str
    label: str
    model_id: str
    index: int
    page: str = "heads"


#: One-click starts plug-ins registered, by label in registration order (:func:`register_start_example`);
#: the home page reads them.
START_EXAMPLES = PluginRegistry()


def register_start_example(example: StartExample) -> StartExample:
    """Offer ``example`` on the home page."""
    return START_EXAMPLES.put(example.label, example)


def _no_widget_values(facts: dict) -> Mapping[str, object]:
    return {}


@dataclass(frozen=True)
class TourStep:
    """A guided-tour step a plug-in adds after the generic ones, offered while ``model_id`` is
    installed: it opens page ``page`` (``"heads"``: Attention Heads; or a registered page's key) on
    example ``example`` of the model's input kind and says one sentence computed from that view.

    ``facts(loaded, trace)`` computes the step's numbers from the model and its trace of the example
    (the tour caches them on disk, keyed by ``version``: bump it when they change meaning);
    ``sentence(facts)`` writes the step's sentence from them; ``widget_values(facts)`` names the
    widgets of the page the step fills (key: value; ``None`` clears one), set once before the page
    draws them. ``work_label`` is what the tour's bar says while ``facts`` runs the first time."""

    title: str
    page: str
    model_id: str
    example: int
    facts: Callable[..., dict]
    sentence: Callable[[dict], str]
    widget_values: Callable[[dict], Mapping[str, object]] = _no_widget_values
    work_label: str = "Computing this step's numbers…"
    version: int = 1


#: Tour steps plug-ins registered, by title in registration order (:func:`register_tour_step`); the
#: tour (bertgeom/ui/tour.py) reads them.
TOUR_STEPS = PluginRegistry()


def register_tour_step(step: TourStep) -> TourStep:
    """Add ``step`` to the guided tour, after the generic steps."""
    return TOUR_STEPS.put(step.title, step)
