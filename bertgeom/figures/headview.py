"""bertviz-style head view as a self-contained HTML page (inline SVG + vanilla JavaScript).

Plotly cannot restyle lines on hover without custom JavaScript, so this view is its own small
page: every head of one layer draws its links in its own colour between two columns of tokens
(queries left, keys right; line opacity = attention weight). Tick a head to show or hide it;
hover a token to see only its links (its queries' or its keys'), click it to keep that
highlight. Nothing is loaded from a network: the HTML works offline and can be saved as is.

:func:`head_view_html` is a pure function returning the HTML string (Streamlit shows it with
``st.iframe``). The links are thresholded (``min_weight``) and rounded to 3 decimals so
a few hundred tokens x 12 heads stay a small page.

References: Vig 2019, "A Multiscale Visualization of Attention in the Transformer Model",
arXiv:1906.05714 (bertviz's head view: colours per head, hover to filter); the design is
re-written here, not bertviz's code.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence

import numpy as np

from bertgeom.figures.base import PALETTE
from bertgeom.tables import noun_forms

__all__ = ["head_colours", "head_view_html", "head_view_links"]


def head_colours(n_heads: int) -> list[str]:
    """One colour per head: the shared palette, then evenly spaced hues beyond it."""
    if n_heads <= len(PALETTE):
        return list(PALETTE[:n_heads])
    return [f"hsl({int(360 * h / n_heads)}, 65%, 45%)" for h in range(n_heads)]


def head_view_links(attention, min_weight: float = 0.02) -> np.ndarray:
    """``[H, Tq, Tk]`` attention -> ``[N, 4]`` rows ``(head, query, key, weight)`` of every link with
    weight >= ``min_weight`` (weights rounded to 3 decimals), in head, query, key order."""
    a = np.asarray(attention, dtype=np.float64)
    if a.ndim != 3:
        raise ValueError("attention must be [heads, queries, keys]")
    h, q, k = np.nonzero(a >= min_weight)
    return np.column_stack([h, q, k, np.round(a[h, q, k], 3)])


def head_view_html(
    attention,
    query_tokens: Sequence[str],
    key_tokens: Sequence[str] | None = None,
    *,
    head_names: Sequence[str] | None = None,
    colours: Sequence[str] | None = None,
    active: Sequence[bool] | None = None,
    min_weight: float = 0.02,
    title: str = "",
    note: str = "",
    row_height: int = 22,
    unit: str = "token",
) -> str:
    """The head view of one layer as a complete HTML document.

    ``attention`` is ``[H, Tq, Tk]`` (one layer's heads, or a window / group aggregate of them);
    ``query_tokens``/``key_tokens`` label its rows and columns (keys default to the queries).
    ``active`` says which heads are ticked at first (default: all). The SVG root carries
    ``data-shown`` (links drawn now) so a test can read what a hover did. ``unit`` names what a
    row is (``token``; ``group`` for grouped rows) in the line a hover writes ("“sat” looks at
    2 tokens (3 links from the ticked heads)"), whose nouns take their number by
    :func:`bertgeom.tables.word_for`'s rule (the script picks one of the forms it is given).
    """
    a = np.asarray(attention, dtype=np.float64)
    if a.ndim == 2:
        a = a[None]
    H, Tq, Tk = a.shape
    key_tokens = list(query_tokens) if key_tokens is None else list(key_tokens)
    if len(query_tokens) != Tq or len(key_tokens) != Tk:
        raise ValueError("token labels do not match the attention's shape")
    names = list(head_names) if head_names is not None else [f"H{h + 1}" for h in range(H)]
    cols = list(colours) if colours is not None else head_colours(H)
    on = [True] * H if active is None else [bool(x) for x in active]
    links = head_view_links(a, min_weight)
    data = {
        "q": [str(t) for t in query_tokens],
        "k": [str(t) for t in key_tokens],
        "heads": [{"name": str(n), "colour": str(c), "on": o} for n, c, o in zip(names, cols, on)],
        "links": [[int(h), int(q), int(k), float(w)] for h, q, k, w in links],
        "row": int(row_height),
        "minw": f"{min_weight:g}",
        # the nouns and verb of the hover's sentence in both numbers (singular, plural)
        "words": {"link": noun_forms("link"), "unit": noun_forms(unit), "looks": noun_forms("looks", "look")},
    }
    if max(Tq, Tk) * row_height + 12 > HEAD_VIEW_MAX_PX:  # the box scrolls: say so beside its scrollbar
        note = (note + " " if note else "") + (f"Scroll inside the box (scrollbar at its right) for all "
                                               f"{max(Tq, Tk)} rows.")
    payload = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")  # never closes the script tag
    return _TEMPLATE.replace("__TITLE__", html.escape(title)).replace("__NOTE__", html.escape(note)) \
        .replace("__MINW__", f"{min_weight:g}").replace("__MAXPX__", str(HEAD_VIEW_MAX_PX)).replace("__DATA__", payload)


#: Height of the head view's scroll box (longer inputs scroll inside it, with a visible scrollbar).
HEAD_VIEW_MAX_PX = 640

_TEMPLATE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>__TITLE__</title>
<style>
 body { font-family: "Source Sans Pro", system-ui, sans-serif; margin: 0; color: #262730; }
 .bar { display: flex; flex-wrap: wrap; gap: 4px 10px; align-items: center; margin: 4px 0 6px; font-size: 13px; }
 .bar label { cursor: pointer; white-space: nowrap; }
 .sw { display: inline-block; width: 11px; height: 11px; border-radius: 2px; margin-right: 3px; vertical-align: -1px; }
 .bar button { font-size: 12px; padding: 1px 8px; border: 1px solid #bbb; border-radius: 4px; \
background: #fff; cursor: pointer; }
 .note { font-size: 12px; color: #6b6f76; margin: 2px 0 4px; }
 #wrap { max-height: __MAXPX__px; overflow-y: auto; border-top: 1px solid #eee; scrollbar-width: auto; \
scrollbar-color: #8a8f98 #eceef1; scrollbar-gutter: stable; }
 #wrap::-webkit-scrollbar { width: 12px; }
 #wrap::-webkit-scrollbar-track { background: #eceef1; }
 #wrap::-webkit-scrollbar-thumb { background: #8a8f98; border-radius: 6px; border: 2px solid #eceef1; }
 svg text { font-size: 12px; cursor: pointer; dominant-baseline: middle; }
 svg text.hl { font-weight: 700; fill: #000; }
 svg rect.tok { fill: transparent; }
 svg rect.tok.hl { fill: #fff1c2; }
 line.link { stroke-width: 2; }
 line.link.off { display: none; }
 #status { font-size: 12px; color: #444; min-height: 16px; }
</style></head><body>
<div class="note">__NOTE__</div>
<div class="bar" id="heads"></div>
<div class="bar"><button id="all" type="button">all heads</button><button id="none" type="button">no head</button>
 <span id="status">Hover a token to see its links; click it to keep them (click again to release).
 Links below __MINW__ are not drawn.</span></div>
<div id="wrap"><svg id="hv" xmlns="http://www.w3.org/2000/svg"></svg></div>
<script>
(function () {
  const D = __DATA__;
  const NS = "http://www.w3.org/2000/svg";
  const svg = document.getElementById("hv");
  const R = D.row, nq = D.q.length, nk = D.k.length, n = Math.max(nq, nk);
  const TW = 170, GAP = 220, X0 = TW, X1 = TW + GAP;
  svg.setAttribute("width", TW * 2 + GAP + 10);
  svg.setAttribute("height", n * R + 12);
  const on = D.heads.map(h => h.on);
  let pinned = null, hover = null;
  const lines = [];
  const gl = document.createElementNS(NS, "g"); svg.appendChild(gl);
  for (const [h, q, k, w] of D.links) {
    const l = document.createElementNS(NS, "line");
    l.setAttribute("x1", X0 + 2); l.setAttribute("y1", 8 + q * R + R / 2);
    l.setAttribute("x2", X1 - 2); l.setAttribute("y2", 8 + k * R + R / 2);
    l.setAttribute("stroke", D.heads[h].colour);
    l.setAttribute("stroke-opacity", Math.max(0.04, Math.min(1, w)).toFixed(3));
    l.setAttribute("class", "link");
    l.dataset.h = h; l.dataset.q = q; l.dataset.k = k; l.dataset.w = w;
    const t = document.createElementNS(NS, "title"); \
t.textContent = D.heads[h].name + ": " + D.q[q] + " \u2192 " + D.k[k] + " " + w.toFixed(3);
    l.appendChild(t); gl.appendChild(l); lines.push(l);
  }
  const toks = [];
  function token(side, i, label) {
    const g = document.createElementNS(NS, "g");
    const y = 8 + i * R;
    const r = document.createElementNS(NS, "rect");
    r.setAttribute("x", side === "q" ? 4 : X1 + 2); r.setAttribute("y", y); r.setAttribute("width", TW - 8);
    r.setAttribute("height", R); r.setAttribute("class", "tok");
    const t = document.createElementNS(NS, "text");
    t.setAttribute("x", side === "q" ? X0 - 6 : X1 + 6); t.setAttribute("y", y + R / 2);
    t.setAttribute("text-anchor", side === "q" ? "end" : "start");
    t.textContent = label.length > 24 ? label.slice(0, 23) + "\u2026" : label;
    const tt = document.createElementNS(NS, "title"); tt.textContent = label; t.appendChild(tt);
    g.appendChild(r); g.appendChild(t); g.setAttribute("class", "token");
    g.dataset.side = side; g.dataset.i = i;
    g.addEventListener("mouseenter", () => { hover = [side, i]; draw(); });
    g.addEventListener("mouseleave", () => { hover = null; draw(); });
    g.addEventListener("click", () => {
      pinned = (pinned && pinned[0] === side && pinned[1] === i) ? null : [side, i]; draw();
    });
    svg.appendChild(g); toks.push([g, r, t]);
  }
  D.q.forEach((s, i) => token("q", i, s));
  D.k.forEach((s, i) => token("k", i, s));
  function draw() {
    const f = hover || pinned;
    let shown = 0;
    for (const l of lines) {
      const h = +l.dataset.h;
      let vis = on[h];
      if (vis && f) vis = f[0] === "q" ? +l.dataset.q === f[1] : +l.dataset.k === f[1];
      l.classList.toggle("off", !vis);
      if (vis) shown++;
    }
    const partner = new Set();
    if (f) for (const l of lines) if (!l.classList.contains("off")) \
partner.add((f[0] === "q" ? "k" : "q") + (f[0] === "q" ? l.dataset.k : l.dataset.q));
    for (const [g, r, t] of toks) {
      const me = f && g.dataset.side === f[0] && +g.dataset.i === f[1];
      const hl = me || partner.has(g.dataset.side + g.dataset.i);
      r.classList.toggle("hl", !!me); t.classList.toggle("hl", !!hl);
    }
    svg.dataset.shown = shown;
    svg.dataset.focus = f ? f[0] + f[1] : "";
    const st = document.getElementById("status");
    if (f) st.textContent = focusLine(f, shown, partner.size)
      + (pinned ? " (kept; click the token again to release)" : "");
  }
  // a count with its noun in the number it takes (bertgeom.tables.word_for's rule: one form for exactly 1)
  function form(n, forms) { return n === 1 ? forms[0] : forms[1]; }
  function counted(n, forms) { return n + " " + form(n, forms); }
  function focusLine(f, shown, partners) {
    const W = D.words, who = "\u201c" + (f[0] === "q" ? D.q[f[1]] : D.k[f[1]]) + "\u201d";
    const how = " (" + counted(shown, W.link) + " from the ticked heads)";
    if (f[0] === "q")
      return shown ? who + " looks at " + counted(partners, W.unit) + how
                   : who + " has no link of weight \u2265 " + D.minw + " in the ticked heads";
    return shown ? counted(partners, W.unit) + " " + form(partners, W.looks) + " at " + who + how
                 : "No " + W.unit[0] + " looks at " + who + " with weight \u2265 " + D.minw + " in the ticked heads";
  }
  const bar = document.getElementById("heads");
  D.heads.forEach((h, i) => {
    const lab = document.createElement("label");
    const cb = document.createElement("input"); cb.type = "checkbox"; cb.checked = h.on; cb.dataset.h = i;
    cb.addEventListener("change", () => { on[i] = cb.checked; draw(); });
    const sw = document.createElement("span"); sw.className = "sw"; sw.style.background = h.colour;
    lab.appendChild(cb); lab.appendChild(sw); lab.appendChild(document.createTextNode(h.name));
    bar.appendChild(lab);
  });
  function setAll(v) { bar.querySelectorAll("input").forEach((cb, i) => { cb.checked = v; on[i] = v; }); draw(); }
  document.getElementById("all").addEventListener("click", () => setAll(true));
  document.getElementById("none").addEventListener("click", () => setAll(false));
  draw();
})();
</script></body></html>
"""


def pooled(attention, size: int = 24) -> np.ndarray:
    """``[..., T, T]`` -> ``[..., n, n]`` with ``n = min(T, size)``: block means, so a thumbnail keeps
    the pattern's shape (diagonal, vertical stripes, blocks) at any input length."""
    a = np.asarray(attention, dtype=np.float64)
    T = a.shape[-1]
    n = min(T, int(size))
    edges = np.linspace(0, T, n + 1).astype(int)
    starts = edges[:-1]
    counts = np.diff(edges).astype(np.float64)
    s = np.add.reduceat(np.add.reduceat(a, starts, axis=-1), starts, axis=-2)
    return s / counts[:, None] / counts[None, :]


def frame_offset(line_width: float, pixels_per_unit: float) -> float:
    """How far (in data units) a thumbnail's frame is moved outward so that its line, drawn centred on
    the rectangle, does not cover the thumbnail's edge cells: half the line plus one pixel."""
    return (line_width / 2 + 1.0) / max(pixels_per_unit, 1.0)


def model_view(
    attentions,
    *,
    importance=None,
    importance_label: str = "importance",
    selected: tuple[int, int] | None = None,
    size_by_importance: bool = True,
    thumb: int = 24,
):
    """bertviz's model view: a thumbnail of every head's attention pattern (rows = layers, columns =
    heads, numbered from 1), each head scaled to its own maximum so its shape shows.

    With ``importance`` (``[L, H]``, e.g. a disabling effect or a gradient importance, as Dodrio
    sizes its head glyphs), each thumbnail is drawn larger the more important the head is (or only
    outlined, ``size_by_importance=False``), and its outline's width follows the importance too.
    One invisible marker per head carries ``customdata = [layer, head]`` so a click selects it.
    """
    import plotly.graph_objects as go

    from bertgeom.figures.base import SELECTED_COLOUR
    from bertgeom.tables import head_label

    a = np.asarray(attentions, dtype=np.float64)
    L, H = a.shape[:2]
    p = pooled(a, thumb)
    n = p.shape[-1]
    peak = p.max(axis=(-1, -2), keepdims=True)
    p = p / np.where(peak > 0, peak, 1.0)
    imp = None
    if importance is not None:
        imp = np.nan_to_num(np.asarray(importance, dtype=np.float64), nan=0.0)
        span = imp.max() - imp.min()
        imp_n = (imp - imp.min()) / span if span > 0 else np.ones_like(imp)
    fig = go.Figure()
    cx, cy, custom, hover = [], [], [], []
    shapes = []
    cell = max(34, min(70, int(1000 / max(H, 1))))  # pixels per head (the figure's height follows it)
    for layer in range(L):
        for head in range(H):
            scale = 0.9 if imp is None or not size_by_importance else 0.3 + 0.6 * imp_n[layer, head]
            d = scale / n
            x0 = head + 0.5 - scale / 2
            y0 = layer + 0.5 - scale / 2
            fig.add_trace(go.Heatmap(z=p[layer, head], x0=x0 + d / 2, dx=d, y0=y0 + d / 2, dy=d, coloraxis="coloraxis",
                                     hoverinfo="skip", showscale=False))
            width = 1.0 if imp is None else 0.5 + 3.5 * imp_n[layer, head]
            colour = SELECTED_COLOUR if selected == (layer, head) else "#555"
            width = 3.5 if selected == (layer, head) else width
            out = frame_offset(width, cell)  # the frame sits outside the thumbnail: its edge columns ([CLS]) show
            shapes.append(dict(type="rect", x0=x0 - out, x1=x0 + scale + out, y0=y0 - out, y1=y0 + scale + out,
                               xref="x", yref="y", line=dict(color=colour, width=width)))
            cx.append(head + 0.5)
            cy.append(layer + 0.5)
            custom.append([layer, head])
            hover.append(head_label(layer, head)
                         + ("" if imp is None else f"<br>{importance_label}: {imp[layer, head]:.3g}"))
    fig.add_trace(go.Scatter(x=cx, y=cy, mode="markers", customdata=custom, hovertext=hover, hoverinfo="text",
                             marker=dict(size=max(14, int(700 / max(H, 1) * 0.8)), symbol="square",
                                         color="rgba(0,0,0,0.01)"),  # invisible, still clickable
                             showlegend=False))
    fig.update_layout(
        shapes=shapes, coloraxis=dict(colorscale="Blues", cmin=0, cmax=1, showscale=False),
        height=cell * L + 70, margin=dict(l=50, r=10, t=30, b=10), plot_bgcolor="white", clickmode="event+select",
    )
    fig.update_xaxes(range=[0, H], tickvals=[h + 0.5 for h in range(H)], ticktext=[f"H{h + 1}" for h in range(H)],
                     side="top", showgrid=False, zeroline=False, fixedrange=True)
    fig.update_yaxes(range=[L, 0], tickvals=[l + 0.5 for l in range(L)], ticktext=[f"L{l + 1}" for l in range(L)],
                     showgrid=False, zeroline=False, fixedrange=True, scaleanchor="x", scaleratio=1)
    return fig


#: The legend entry of tokens the colour-by leaves unlabelled (a genome's [CLS]/[SEP]; a text's tokens).
NO_LABEL = "no label ([CLS], [SEP], unlabelled)"


def legend_note(categories) -> str:
    """One line under a legend saying what its two kinds of "no ..." entries are, so they are not
    read as one thing: :data:`NO_LABEL` (tokens without a label) and the paper's ``no domain 1..4``
    (named stretches of the spike between its labelled domains, Bonino et al. 2025)."""
    cats = set(map(str, categories))
    notes = []
    if any(c.startswith("no domain") for c in cats):
        notes.append("“no domain 1…4”: spike stretches between the paper's named domains")
    if NO_LABEL in cats:
        notes.append("“no label”: tokens with no position in any region ([CLS], [SEP])")
    return " · ".join(notes)


def qk_set_scatter(frame, colour_by: str = "kind", *, title: str = "", highlight=None):
    """The joint query/key map of :func:`bertgeom.analysis.qk_embedding.embed_qk`: circles are
    queries, crosses keys, coloured by ``colour_by`` (a column: kind, group, label or role).
    Each point's ``customdata`` is ``[item, position, role]`` so a click opens its input; an SVG
    scatter (not WebGL) so clicks work at any size. ``highlight`` (a boolean mask over the frame's
    rows) rings the search hits."""
    import plotly.graph_objects as go

    from bertgeom.figures.base import category_colours, layout

    cats = frame[colour_by].astype(str).replace("", NO_LABEL)
    from bertgeom.safety import plotly_text

    palette = category_colours(sorted(set(cats)))
    fig = go.Figure()
    for cat, colour in palette.items():
        for role, symbol in (("query", "circle"), ("key", "x")):
            sel = ((cats == cat) & (frame["role"] == role)).to_numpy()
            if not sel.any():
                continue
            sub = frame[sel]
            fig.add_trace(go.Scatter(
                x=sub["x"], y=sub["y"], mode="markers", name=f"{plotly_text(cat)} ({role})", legendgroup=cat,
                marker=dict(color=colour, symbol=symbol, size=7, opacity=0.75, line=dict(width=0)),
                customdata=np.column_stack([sub["item"], sub["position"], sub["role"]]).tolist(),
                hovertext=[f"{role} · {plotly_text(t)} (input {i + 1}, position {p})" for t, i, p in
                           zip(sub["token"], sub["item"], sub["position"])],
                hoverinfo="text",
            ))
    if highlight is not None and np.any(highlight):
        sub = frame[np.asarray(highlight)]
        fig.add_trace(go.Scatter(x=sub["x"], y=sub["y"], mode="markers", name="search hits", hoverinfo="skip",
                                 marker=dict(size=15, symbol="circle-open", color="#e4572e", line=dict(width=2))))
    layout(fig, title=title, height=560)
    note = legend_note(palette)
    fig.update_layout(clickmode="event+select", legend=dict(itemsizing="constant"))
    if note:  # the two kinds of "no ..." entries, told apart under the plot
        fig.add_annotation(text=note, xref="paper", yref="paper", x=0, y=-0.02, xanchor="left", yanchor="top",
                           showarrow=False, font=dict(size=11, color="#555"))
    fig.update_xaxes(showticklabels=False, title="")
    fig.update_yaxes(showticklabels=False, title="", scaleanchor="x", scaleratio=1)
    return fig
