"""The guided tour: a few steps, each opening the page, model, input, head and tab it talks about,
with one sentence computed from what that view shows (never written by hand).

Home shows the steps and starts the tour; while it runs, a bar at the top of every page shows the
current step with *Previous* / *Next* / *End tour*. A step is applied in a button callback (so
widget values may be set) and the page switch happens at the start of the next run
(:func:`tour_bar`, called by ``app.py`` before the sidebar).

The generic steps read MiniLM on an example sentence. A plug-in adds its steps after them
(:class:`bertgeom.extensions.TourStep`, :func:`bertgeom.extensions.register_tour_step`), shown while its model is
installed: the tour computes their numbers from the model and its trace of the step's example (cached
on disk) and fills the widgets the step names. The SARS-CoV-2 plug-in's genome step opens the Variant
Classifier with the marker change that moves the call in its *What if?* box.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np
import streamlit as st

from bertgeom.cache import Memo
from bertgeom.extensions import PAGES, TOUR_STEPS, TourStep
from bertgeom.inputs import input_kind_of
from bertgeom.models import REGISTRY

TEXT_MODEL = "minilm-l6"
SENTENCE = 0  # example sentence index


@dataclass(frozen=True)
class StepView:
    """What a step shows once its numbers are in: its sentence, the head it selects ((layer, head),
    0-based, or ``None``) and the widget values it fills (key: value; ``None`` clears one)."""

    sentence: str
    head: tuple[int, int] | None = None
    widgets: Mapping[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class Step:
    """One tour step: where it goes and how its sentence is computed."""

    title: str
    page: str  # url_path of the page
    model: str
    tab: tuple[str, str] | None  # (widget key, value) of the tab or section to open
    colour: str | None  # the head grid's colour-by
    facts: Callable[[], StepView]  # the step's sentence, head and widget values, from its numbers
    settings: tuple[tuple[str, object], ...] = ()  # other widget values the sentence assumes
    text: Callable[[], str] = lambda: _sentence_text()  # the input the step opens
    work_label: str = "Computing this step's numbers…"  # the bar's last stage while facts() first runs


# ---- facts (cached; no Streamlit element inside) ---------------------------------------------
def _sentence_text() -> str:
    from bertgeom.examples import example_sentences

    return example_sentences()[SENTENCE]


@st.cache_data(show_spinner=False, max_entries=4)
def _text_facts(model_id: str, text: str) -> dict:
    """Every number the text steps say, each computed by the function that prints it on the page
    the step opens (:mod:`bertgeom.analysis.tour_facts`), so sentence and page cannot disagree."""
    from bertgeom.analysis.patterns import clark_behaviour
    from bertgeom.analysis.tour_facts import (
        layer_ranking, map_columns, map_note, special_heads_note, strongest_head, tour_facts,
    )
    from bertgeom.ui.cache import cached_head_features, subject_of

    subject = subject_of(model_id, text)
    table = cached_head_features(subject)
    prev = strongest_head(table, "prev")
    trace = subject.trace
    special, special_max = special_heads_note(table)
    behaviour = str(clark_behaviour(table).labels[prev.layer, prev.head])  # the label the page shows it with
    return {**tour_facts(table), "prev_fact": prev,
            # the caption under the token map Head detail draws (the step turns the words toggle off)
            "one_back": map_note(trace.attentions[prev.layer, prev.head], behaviour, **map_columns(trace.encoded)),
            "layer_prev": layer_ranking(table, "prev", prev.layer), "n_heads_layer": int(table["prev"].shape[1]),
            "special": special, "special_max": special_max}


def _prev_step() -> StepView:
    f = _text_facts(TEXT_MODEL, _sentence_text())
    p = f["prev_fact"]
    return StepView(
        f"The grid is coloured by *attention to previous token*: {f['prev']}. Its map below draws strong weights "
        f"**dark**; on “{_sentence_text()}”, {f['one_back']}.", (p.layer, p.head))


def _head_view_step() -> StepView:
    f = _text_facts(TEXT_MODEL, _sentence_text())
    p = f["prev_fact"]
    others = [f"H{h + 1} ({v:.2f})" for h, v in f["layer_prev"][1:3]]
    return StepView(
        f"All {f['n_heads_layer']} heads of layer {p.layer + 1} at once, one colour each. Hover a word: "
        f"H{p.head + 1}'s lines go one word up ({f['prev_fact'].value:.2f} of its attention); the next most "
        f"previous-looking heads here are {', '.join(others)}. Untick heads to compare them.", (p.layer, p.head))


def _sink_step() -> StepView:
    f = _text_facts(TEXT_MODEL, _sentence_text())
    layer, head = (int(x) for x in f["sink_head"].split(","))
    return StepView(f"Now coloured by attention to [CLS]: {f['sink']} Clark et al. (2019, arXiv:1906.04341) read "
                    "such resting attention as a no-op.", (layer, head))


def _model_view_step() -> StepView:
    f = _text_facts(TEXT_MODEL, _sentence_text())
    return StepView(f"Every head's map as a thumbnail: {f['special']}. "
                    "Click a thumbnail to open that head; *Size by* shows which heads matter when disabled.",
                    f["special_max"])


@st.cache_data(show_spinner=False, max_entries=4)
def _cone_facts(model_id: str, text: str) -> dict:
    from bertgeom.analysis.cone import cone_index
    from bertgeom.analysis.isotropy import hidden_state_isoscore_curve
    from bertgeom.sets.cone import rows_for
    from bertgeom.ui.cache import get_trace

    trace = get_trace(model_id, text)
    rows = rows_for(trace.encoded, "content")
    hs = np.asarray(trace.hidden_states, dtype=np.float64)[:, rows]
    return {"cone": cone_index(hs, normalized=True), "iso": hidden_state_isoscore_curve(hs), "m": int(rows.sum())}


def _cone_step() -> StepView:
    from bertgeom.analysis.tour_facts import cone_summary

    f = _cone_facts(TEXT_MODEL, _sentence_text())
    return StepView(cone_summary(f["cone"], f["iso"], f["m"]))


# ---- plug-in steps (bertgeom.extensions.TourStep) -------------------------------------------------
#: The plug-in steps' numbers this server read last, in front of their JSON files (bertgeom.cache).
_PLUGIN_FACTS = Memo("tour-plugin-facts", 4)


def _plugin_facts(title: str, model_id: str, text: str, version: int) -> dict:
    """A plug-in step's numbers from the model and its trace of ``text`` (forward passes: kept in
    memory and on disk as JSON, never pickled, by the model's weights, the text and the step's
    ``version``, bumped when its numbers change meaning)."""
    from bertgeom.cache import CacheKey, cached, text_digest
    from bertgeom.ui.cache import cached_model, get_trace

    loaded = cached_model(model_id)
    key = CacheKey.of("tour-facts", version, weights=loaded.weights_hash, inputs=text_digest(text), step=title)
    return cached(key, lambda: TOUR_STEPS[title].facts(loaded, get_trace(model_id, text)), memo=_PLUGIN_FACTS,
                  disk="json")


def _example_text(model_id: str, index: int) -> str:
    """Example ``index`` of the input kind ``model_id`` reads."""
    return input_kind_of(REGISTRY[model_id]).examples()[index].text


def _plugin_step(tour_step: TourStep) -> Step:
    """The tour's step for a plug-in's :class:`~bertgeom.extensions.TourStep`: its sentence and the widget
    values it fills, from its numbers."""

    def text() -> str:
        return _example_text(tour_step.model_id, tour_step.example)

    def facts() -> StepView:
        f = _plugin_facts(tour_step.title, tour_step.model_id, text(), tour_step.version)
        return StepView(tour_step.sentence(f), widgets=dict(tour_step.widget_values(f)))

    page = PAGES[tour_step.page].url_path if tour_step.page in PAGES else tour_step.page
    return Step(tour_step.title, page, tour_step.model_id, None, None, facts, text=text,
                work_label=tour_step.work_label)


def steps() -> list[Step]:
    """The tour's steps whose models this server has: the generic ones, then the plug-ins'."""
    out = []
    if TEXT_MODEL in REGISTRY:
        out += [
            Step("A head that reads the previous word", "heads", TEXT_MODEL, ("heads_tab", "Head detail"), "prev",
                 _prev_step, (("w_words", False),)),
            Step("Every head of a layer, as lines", "heads", TEXT_MODEL, ("heads_tab", "Head view"), "prev",
                 _head_view_step),
            Step("Heads that rest on a special token", "heads", TEXT_MODEL, ("heads_tab", "Head detail"), "cls",
                 _sink_step),
            Step("Every head at a glance", "heads", TEXT_MODEL, ("heads_tab", "Model view"), "cls", _model_view_step),
            Step("The cone narrows, layer by layer", "cone", TEXT_MODEL, ("w_cone_section", "isotropy"), None,
                 _cone_step, (("w_cone_tokens", "content"),)),
        ]
    out += [_plugin_step(s) for s in TOUR_STEPS.values() if s.model_id in REGISTRY]
    return out


# ---- computing a step: at once when this server has done it, else under a bar -----------------
#: Steps whose numbers this server process has computed (their model, trace and facts are in its caches).
_WARM: set[str] = set()
_TIMINGS_FILE = "tour-timings.json"

#: What the bar says while a step is computed for the first time on this server.
FIRST_TIME_NOTE = ("A tour step usually opens at once: its model, its input's pass and its numbers are computed once "
                   "per server and kept. This server has not computed this step yet, so it does now, for you "
                   "(loading the model is most of it; Cancel stops between stages).")


def _stages(step: Step) -> list[tuple[str, Callable[[], object]]]:
    """The step's work in the order it runs, each stage cached per process (so the page below and the
    next steps read it at once): load the model, run it on the input, per-head features, the numbers."""
    from bertgeom.ui.cache import cached_head_features, cached_model, get_trace, subject_of

    text = step.text()
    name = REGISTRY[step.model].display_name if step.model in REGISTRY else step.model
    out = [(f"Loading {name} (once per server)…", lambda: cached_model(step.model)),
           ("Running the model on the tour's input…", lambda: get_trace(step.model, text))]
    if step.page == "heads":
        out.append(("Computing every head's features…", lambda: cached_head_features(subject_of(step.model, text))))
    out.append((step.work_label, step.facts))
    return out


def _timings_path():
    from bertgeom.runtime import cache_dir

    return cache_dir() / _TIMINGS_FILE


def _read_timings() -> dict[str, float]:
    """Seconds each stage took the last time it ran on this machine (model and stage: seconds)."""
    import json

    try:
        data = json.loads(_timings_path().read_text())
        return {str(k): float(v) for k, v in data.items()} if isinstance(data, dict) else {}
    except (OSError, ValueError, TypeError):
        return {}


def _write_timings(new: dict[str, float]) -> None:
    import json

    from bertgeom.safety import AtomicFile

    path = _timings_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with AtomicFile(path) as out:  # two servers timing at once each replace the file whole
            out.write(json.dumps({**_read_timings(), **new}))
            out.commit(sync=False)
    except OSError:
        pass  # no writable cache: the next estimate is from the pace alone


def stage_eta(expected: list[float | None]) -> Callable[[int, int, float], str]:
    """An honest time left for stages of known past durations: the remaining stages' durations the
    last time on this machine, less the time already spent in the current one; where a remaining
    stage was never timed here, the pace so far (:func:`bertgeom.ui.widgets.eta_text`)."""
    from bertgeom.ui.widgets import eta_text

    marks = [0.0]  # elapsed at the start of the current stage

    def eta(done: int, total: int, elapsed: float) -> str:
        if done >= total:
            return "finishing…"
        rest = expected[done:]
        if any(x is None for x in rest):
            return eta_text(done, total, elapsed)
        if len(marks) <= done:
            marks.append(elapsed)
        left = max(sum(rest) - (elapsed - marks[min(done, len(marks) - 1)]), 1.0)
        return f"about {left:.0f} s left (as long as it took the last time on this machine)"

    return eta


def _compute(step: Step, index: int) -> StepView:
    """The step's view: at once when this server has computed them, else stage by stage under a bar
    with the time left and *Cancel* (drawn here, outside every cached function)."""
    import time

    from bertgeom.ui.widgets import progress

    if step.title in _WARM:
        with st.spinner("Computing this step's numbers…"):  # cached: a moment (evicted: one forward pass)
            return step.facts()
    stages = _stages(step)
    timed = _read_timings()
    names = [f"{step.model}: {label}" for label, _ in stages]
    eta = stage_eta([timed.get(n) for n in names])
    taken: dict[str, float] = {}
    with progress(stages[0][0], key=f"tour step {index + 1}", note=FIRST_TIME_NOTE, eta=eta) as update:
        out = None
        for k, ((label, run), name) in enumerate(zip(stages, names)):
            update(k, len(stages), label)
            t0 = time.perf_counter()
            out = run()
            taken[name] = time.perf_counter() - t0
        update(len(stages), len(stages), "Done")
    _WARM.add(step.title)
    if any(t > 0.5 for t in taken.values()):  # a real computation, not the caches answering
        _write_timings(taken)
    return out


# ---- applying a step (button callbacks) -------------------------------------------------------
def _apply(index: int) -> None:
    from bertgeom.ui.state import widget_key

    all_steps = steps()
    if not 0 <= index < len(all_steps):
        st.session_state.pop("_tour_step", None)
        return
    step = all_steps[index]
    st.session_state["model_id"] = step.model
    kind = input_kind_of(REGISTRY[step.model])
    st.session_state[kind.session_key] = st.session_state[widget_key(kind)] = step.text()
    st.session_state["_tour_step"] = index
    st.session_state["_tour_go"] = step.page
    # the step's numbers (and the head they name) are computed by the bar, under its spinner: a
    # callback cannot show progress, so a first step computed here left the button frozen in silence
    st.session_state["_tour_select"] = index
    if step.colour:
        st.session_state["w_feature"] = step.colour
    if step.tab:
        st.session_state[step.tab[0]] = step.tab[1]
    for key, value in step.settings:
        st.session_state[key] = value


def _select_from(view: StepView) -> None:
    """Apply what a step's view names (its head, the widget values a plug-in step fills): once per
    step, from the bar, before the page draws the widgets they set."""
    from bertgeom.ui.state import select_head

    if view.head is not None:
        select_head(*view.head)
    for key, value in view.widgets.items():
        if value is None:
            st.session_state.pop(key, None)
        else:
            st.session_state[key] = value


def _end() -> None:
    st.session_state.pop("_tour_step", None)


def start_button(label: str = "Start the tour", key: str = "w_tour_start") -> None:
    st.button(label, on_click=_apply, args=(0,), key=key, type="primary", icon=":material/play_arrow:")


def tour_bar(pages: dict, current) -> None:
    """Follow a pending step's page switch, then (while a tour runs) draw the step's bar."""
    go = st.session_state.pop("_tour_go", None)
    index = st.session_state.get("_tour_step")
    if index is None:
        return
    all_steps = steps()
    if not 0 <= index < len(all_steps):
        return
    step = all_steps[index]
    if go and go != current.url_path:
        for page in (p for group in pages.values() for p in group):
            if page.url_path == go:
                query = {step.tab[0]: step.tab[1]} if step.tab else {}
                st.switch_page(page, query_params=query)
    if current.url_path != step.page:
        return  # the user left the step's page: the bar waits on it (Home lists the steps)
    with st.container(border=True, key="tour_bar"):
        c1, c2 = st.columns([5, 3], vertical_alignment="center")
        with c2:  # first: the buttons stay when a first computation is cancelled (it stops the run)
            b1, b2, b3 = st.columns([4, 4, 3])
            b1.button("◀ Back", key="w_tour_prev", on_click=_apply, args=(index - 1,), disabled=index == 0,
                      help="Previous step")
            if index + 1 < len(all_steps):
                b2.button("Next ▶", key="w_tour_next", on_click=_apply, args=(index + 1,), type="primary")
            b3.button("End", key="w_tour_end", on_click=_end, help="End the tour")
        with c1:
            st.markdown(f"**Tour · step {index + 1} of {len(all_steps)} — {step.title}**")
            try:
                view = _compute(step, index)
                if st.session_state.get("_tour_select") == index:
                    st.session_state.pop("_tour_select")
                    _select_from(view)
                st.markdown(view.sentence)
            except Exception as exc:  # noqa: BLE001 - one sentence, never a traceback
                st.session_state.pop("_tour_select", None)
                from bertgeom.safety import error_text, plain

                st.warning(f"This step's numbers could not be computed: {plain(error_text(exc, 160))}")


def tour_overview() -> None:
    """Home's tour panel: the steps, with a button to start (or resume)."""
    all_steps = steps()
    if not all_steps:
        st.info("The tour needs the bundled models, which this server does not offer.")
        return
    with st.container(border=True, key="tour_home"):
        st.markdown(f"### A guided tour in {len(all_steps)} steps")
        st.caption("Each step opens the page, model, input, head and tab it talks about and says, in one sentence "
                   "computed from that view, what to look at. Use *Next ▶* in the bar at the top of each page.")
        st.markdown("\n".join(f"{i + 1}. **{s.title}**" for i, s in enumerate(all_steps)))
        current = st.session_state.get("_tour_step")
        c1, c2 = st.columns([1, 3])
        with c1:
            start_button()
        if current is not None and 0 < current < len(all_steps):
            with c2:
                st.button(f"Resume at step {current + 1}", on_click=_apply, args=(current,), key="w_tour_resume")
