"""The HTML page of a report: one inline-SVG chart per logged tag, runs overlaid, the summary table, the
findings and the config differences; a few lines of inline JavaScript show values under the mouse, and the
page loads nothing from the network."""

from __future__ import annotations

import datetime
import html
import json
import math
import re
import statistics
from dataclasses import dataclass

import rlcore
from rlcore.report.diagnosis import PER_STEP_TAGS, Finding
from rlcore.report.runs import Run, aggregate, config_differences, flatten, group_runs

#: Chart sections: (title, predicate on the tag), in page order; a tag goes to the first that matches.
SECTIONS = (
    ("Episodes", lambda t: t.startswith(("Episode/", "Train/"))),
    ("Task metrics", lambda t: t.startswith("Env/") and not t.startswith("Env/reward/")),
    ("Losses and learning rate", lambda t: t.startswith("Loss/")),
    ("Policy", lambda t: t.startswith(("Policy/", "Rnd/"))),
    ("Reward terms", lambda t: t.startswith("Env/reward/")),
    ("Performance", lambda t: t.startswith("Perf/")),
    ("Other", lambda t: True),
)
TAG_ORDER = ("Episode/mean_return", "Episode/mean_length", "Episode/mean_reward_per_step", "Loss/value", "Loss/surrogate", "Loss/entropy",
             "Loss/kl", "Loss/learning_rate", "Policy/mean_std")
COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f",
          "#bcbd22")
MAX_POINTS = 600  # per drawn line; longer curves keep each bucket's min and max, so spikes stay visible
W, H, LEFT, RIGHT, TOP, BOTTOM = 480, 230, 60, 470, 8, 200  # chart viewBox and plot area


def _downsample(xs: list[int], *ys: list[float], how: tuple[str, ...] = ()) -> tuple[list[int], ...]:
    """At most ``MAX_POINTS`` points: each bucket keeps its min and max (``how``: "min"/"max" keeps only that)."""
    n = len(xs)
    if n <= MAX_POINTS:
        return (xs, *ys)
    size = math.ceil(n / (MAX_POINTS // 2))
    out_x: list[int] = []
    out_y: list[list[float]] = [[] for _ in ys]
    for b in range(0, n, size):
        idx = list(range(b, min(b + size, n)))
        first, last = idx[0], idx[-1]
        out_x += [xs[first], xs[last]]
        for k, y in enumerate(ys):
            mode = how[k] if k < len(how) else "both"
            lo, hi = min(y[i] for i in idx), max(y[i] for i in idx)
            if mode == "min":
                out_y[k] += [lo, lo]
            elif mode == "max":
                out_y[k] += [hi, hi]
            else:  # min then max in the order they occur, so the shape of a spike survives
                i_lo = min(idx, key=lambda i: y[i])
                i_hi = max(idx, key=lambda i: y[i])
                out_y[k] += [lo, hi] if i_lo <= i_hi else [hi, lo]
    return (out_x, *out_y)


def _ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    span = hi - lo
    raw = span / max(n, 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step) * step
    return [first + i * step for i in range(int((hi - first) / step + 1e-9) + 1)]


def _label(v: float) -> str:
    return "0" if abs(v) < 1e-12 else f"{v:.4g}"


@dataclass
class Series:
    """One drawn curve: a run, or a group's mean with its min-max band (``lo``/``hi``)."""

    name: str
    color: str
    x: list[int]
    y: list[float]
    lo: list[float] | None = None
    hi: list[float] | None = None


@dataclass
class _Scale:
    """A chart's data ranges ``[x0, x1] x [y0, y1]`` and the map from data to SVG coordinates of the plot area;
    ``log``: y is drawn on a log10 scale (y0 and y1 are then decades)."""

    x0: float
    x1: float
    y0: float
    y1: float
    log: bool

    @classmethod
    def fit(cls, tag: str, series: list[Series]) -> _Scale:
        """The ranges of every finite value of ``series`` (bands included), y padded by 5 %; a loss that explodes
        (spans over three decades) on a log scale."""
        xs = [x for s in series for x in s.x]
        ys = [y for s in series for y in s.y + (s.lo or []) + (s.hi or []) if math.isfinite(y)]
        x0, x1 = (min(xs), max(xs)) if xs else (0, 1)
        if x1 == x0:
            x0, x1 = x0 - 1, x1 + 1
        y0, y1 = (min(ys), max(ys)) if ys else (0.0, 1.0)
        log = tag.startswith("Loss/") and y0 > 0 and y1 / y0 > 1e3  # a loss that explodes spans decades
        if log:
            y0, y1 = math.log10(y0), math.log10(y1)
        pad = (y1 - y0) * 0.05 or (abs(y0) * 0.1 or 1.0)
        return cls(x0, x1, y0 - pad, y1 + pad, log)

    def px(self, x: float) -> float:
        return LEFT + (x - self.x0) / (self.x1 - self.x0) * (RIGHT - LEFT)

    def py(self, y: float) -> float:
        y = math.log10(y) if self.log else y
        return BOTTOM - (y - self.y0) / (self.y1 - self.y0) * (BOTTOM - TOP)

    def path(self, x: list[int], y: list[float]) -> str:
        """An SVG path through the points; a gap at every non-finite value (and non-positive one on a log scale)."""
        parts, pen = [], "M"
        for a, b in zip(x, y):
            if not math.isfinite(b) or (self.log and b <= 0):
                pen = "M"
                continue
            parts.append(f"{pen}{self.px(a):.1f},{self.py(b):.1f}")
            pen = "L"
        return " ".join(parts)


def render_chart(index: int, tag: str, series: list[Series], markers: list[Finding]) -> tuple[str, dict]:
    """The SVG of one chart and its hover data (``{"x0", "x1", "left", "right", "series"}``)."""
    scale = _Scale.fit(tag, series)
    out = [f'<svg class="chart" data-chart="{index}" viewBox="0 0 {W} {H}" role="img" '
           f'aria-label="{html.escape(tag)}">', f'<rect x="{LEFT}" y="{TOP}" width="{RIGHT - LEFT}" '
           f'height="{BOTTOM - TOP}" class="plot"/>']
    out += _axes_svg(scale)
    hover = []
    for s in series:
        svg, data = _series_svg(scale, s)
        out += svg
        hover.append(data)
    out += [f'<line x1="{scale.px(f.iteration):.1f}" x2="{scale.px(f.iteration):.1f}" y1="{TOP}" y2="{BOTTOM}" '
            f'class="mark {f.severity}"><title>{html.escape(f.rule)} at iteration {f.iteration}</title></line>'
            for f in markers if scale.x0 <= f.iteration <= scale.x1]
    out.append(f'<line class="cursor" x1="0" x2="0" y1="{TOP}" y2="{BOTTOM}" visibility="hidden"/></svg>')
    return "".join(out), {"x0": scale.x0, "x1": scale.x1, "left": LEFT, "right": RIGHT, "series": hover}


def _axes_svg(scale: _Scale) -> list[str]:
    """Grid lines and labels of the y ticks (decades on a log scale), the integer x ticks, the x axis title."""
    y0, y1, py, px = scale.y0, scale.y1, scale.py, scale.px
    yt = [10 ** e for e in range(math.ceil(y0), math.floor(y1) + 1)] if scale.log else _ticks(y0, y1)
    if scale.log and len(yt) < 2:
        yt = [10 ** t for t in _ticks(y0, y1, 3)]
    out = [f'<line x1="{LEFT}" x2="{RIGHT}" y1="{py(t):.1f}" y2="{py(t):.1f}" class="grid"/>'
           f'<text x="{LEFT - 4}" y="{py(t) + 3:.1f}" class="yt">{_label(t)}</text>' for t in yt]
    out += [f'<line x1="{px(t):.1f}" x2="{px(t):.1f}" y1="{BOTTOM}" y2="{BOTTOM + 4}" class="axis"/>'
            f'<text x="{px(t):.1f}" y="{BOTTOM + 15}" class="xt">{int(t)}</text>'
            for t in _ticks(scale.x0, scale.x1) if t == int(t)]
    out.append(f'<text x="{RIGHT}" y="{H - 2}" class="xl">iteration{" (log y)" if scale.log else ""}</text>')
    return out


def _series_svg(scale: _Scale, s: Series) -> tuple[list[str], dict]:
    """One series' min-max band (groups of runs, where it has width) and its line, both downsampled, and the
    line's hover data."""
    out = []
    if s.lo is not None and s.hi is not None and any(a != b for a, b in zip(s.lo, s.hi)):
        bx, lo, hi = _downsample(s.x, s.lo, s.hi, how=("min", "max"))
        top = scale.path(bx, hi)
        bottom = scale.path(bx[::-1], lo[::-1]).replace("M", "L", 1)
        if top and bottom and (not scale.log or all(v > 0 for v in lo)):
            out.append(f'<path d="{top} {bottom} Z" fill="{s.color}" class="band"/>')
    dx, dy = _downsample(s.x, s.y)
    out.append(f'<path d="{scale.path(dx, dy)}" stroke="{s.color}" class="line"><title>{html.escape(s.name)}</title>'
               "</path>")
    return out, {"name": s.name, "color": s.color, "x": dx, "y": [y if math.isfinite(y) else None for y in dy]}


def _tag_key(tag: str) -> tuple:
    return (TAG_ORDER.index(tag) if tag in TAG_ORDER else len(TAG_ORDER), tag)


def _anchor(tag: str) -> str:
    return "c-" + re.sub(r"[^A-Za-z0-9]+", "-", tag).strip("-")


# ============================================================================ the page
CSS = """
body{font:14px/1.4 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0 auto;max-width:1500px;padding:16px 24px;
color:#222;background:#fff}
h1{font-size:22px;margin:4px 0}h2{font-size:18px;margin:24px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
h3{font-size:15px;margin:14px 0 6px}.meta{color:#666}table{border-collapse:collapse;margin:6px 0}
td,th{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}th{background:#f5f5f5}
td.num{text-align:right;font-variant-numeric:tabular-nums}code{font-size:12px}
.grid-charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(420px,1fr));gap:10px}
.card{border:1px solid #e3e3e3;border-radius:6px;padding:6px 8px}.card h4{margin:0 0 2px;font-size:13px}
.card .last{color:#666;font-size:12px}svg.chart{width:100%;height:auto;display:block}
svg .plot{fill:#fcfcfc;stroke:#ccc}svg .grid{stroke:#eee}svg .axis{stroke:#999}
svg text{font-size:10px;fill:#555}svg .yt{text-anchor:end}svg .xt{text-anchor:middle}svg .xl{text-anchor:end}
svg .line{fill:none;stroke-width:1.6}svg .band{opacity:.18;stroke:none}svg .cursor{stroke:#444;stroke-dasharray:2 2}
svg .mark{stroke-width:1.4;stroke-dasharray:5 3}svg .mark.error{stroke:#c00}svg .mark.warning{stroke:#e67e00}
svg .mark.info{stroke:#2a7ab0}
.finding{border-left:4px solid #999;padding:4px 10px;margin:6px 0;background:#fafafa}
.finding.error{border-color:#c00}.finding.warning{border-color:#e67e00}.finding.info{border-color:#2a7ab0}
.sev{font-weight:600;text-transform:uppercase;font-size:11px;margin-right:6px}.ok{color:#2a7a2a}
.legend span{display:inline-block;margin-right:14px}.legend i{display:inline-block;width:18px;height:4px;
vertical-align:middle;margin-right:5px}
#tip{position:fixed;pointer-events:none;background:#fff;border:1px solid #bbb;border-radius:4px;padding:4px 8px;
font-size:12px;box-shadow:0 1px 4px rgba(0,0,0,.15);z-index:9}
"""

# Shows the values under the mouse: the nearest logged iteration of every curve of the chart.
JS = """
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("report-data").textContent);
  var tip = document.getElementById("tip");
  function nearest(xs, x) {
    var lo = 0, hi = xs.length - 1;
    while (hi - lo > 1) { var mid = (lo + hi) >> 1; if (xs[mid] < x) { lo = mid; } else { hi = mid; } }
    return Math.abs(xs[lo] - x) <= Math.abs(xs[hi] - x) ? lo : hi;
  }
  function fmt(v) {
    if (v === null) { return "-"; }
    var a = Math.abs(v);
    return (a >= 1e5 || (a > 0 && a < 1e-3)) ? v.toExponential(3) : String(+v.toPrecision(5));
  }
  function hide(svg) { tip.hidden = true; svg.querySelector(".cursor").setAttribute("visibility", "hidden"); }
  Array.prototype.forEach.call(document.querySelectorAll("svg.chart"), function (svg) {
    var chart = data[Number(svg.getAttribute("data-chart"))];
    svg.addEventListener("mousemove", function (ev) {
      var pt = svg.createSVGPoint(); pt.x = ev.clientX; pt.y = ev.clientY;
      var p = pt.matrixTransform(svg.getScreenCTM().inverse());
      var f = (p.x - chart.left) / (chart.right - chart.left);
      if (f < 0 || f > 1 || !chart.series.length) { hide(svg); return; }
      var it = chart.x0 + f * (chart.x1 - chart.x0), step = null;
      tip.textContent = "";
      chart.series.forEach(function (s) {
        if (!s.x.length) { return; }
        var i = nearest(s.x, it); if (step === null) { step = s.x[i]; }
        var row = document.createElement("div"), sw = document.createElement("span");
        sw.style.color = s.color; sw.textContent = "\\u25A0 ";
        row.appendChild(sw); row.appendChild(document.createTextNode(s.name + ": " + fmt(s.y[i])));
        tip.appendChild(row);
      });
      var head = document.createElement("b"); head.textContent = "iteration " + step;
      tip.insertBefore(head, tip.firstChild);
      var x = chart.left + (step - chart.x0) / (chart.x1 - chart.x0) * (chart.right - chart.left);
      var cursor = svg.querySelector(".cursor");
      cursor.setAttribute("x1", x); cursor.setAttribute("x2", x); cursor.setAttribute("visibility", "visible");
      tip.hidden = false;
      tip.style.left = Math.min(ev.clientX + 14, window.innerWidth - tip.offsetWidth - 4) + "px";
      tip.style.top = (ev.clientY + 14) + "px";
    });
    svg.addEventListener("mouseleave", function () { hide(svg); });
  });
  document.body.setAttribute("data-ready", "1");
})();
"""


def _smoothed_best(points: list[tuple[int, float]]) -> tuple[float, int] | None:
    vals = [(s, v) for s, v in points if math.isfinite(v)]
    if not vals:
        return None
    w = max(1, min(10, len(vals) // 20))
    best = max(range(len(vals)), key=lambda i: statistics.fmean(v for _, v in vals[max(0, i - w + 1): i + 1]))
    return statistics.fmean(v for _, v in vals[max(0, best - w + 1): best + 1]), vals[best][0]


def _final(points: list[tuple[int, float]] | None) -> float | None:
    vals = [v for _, v in points or [] if math.isfinite(v)]
    return statistics.fmean(vals[-max(1, min(10, len(vals) // 20)):]) if vals else None


def _summary_table(runs: list[Run]) -> str:
    rows = ["<table><tr><th>run</th><th>task</th><th>seed</th><th>iterations</th><th>final return</th>"
            "<th>best return (iteration)</th><th>final episode length</th><th>training time</th><th>findings</th>"
            "</tr>"]
    legacy = 0
    for r in runs:
        steps = [s for pts in r.scalars.values() for s, _ in pts]
        ret = r.scalars.get("Episode/mean_return") or r.scalars.get("Train/mean_reward")
        length = r.scalars.get("Episode/mean_length") or r.scalars.get("Train/mean_episode_length")
        best = _smoothed_best(ret) if ret else None
        partial = ret is not None and not any(r.scalars.get(t) for t in PER_STEP_TAGS)
        legacy += partial
        secs = sum(v for tag in ("Perf/collection_time", "Perf/learning_time")
                   for _, v in r.scalars.get(tag, []) if math.isfinite(v))
        final_ret, final_len = _final(ret), _final(length)
        task = (r.config.get("task") or {}).get("name", "-") if isinstance(r.config.get("task"), dict) else "-"
        cells = [html.escape(r.name), html.escape(str(task)), html.escape(str(r.config.get("seed", "-"))),
                 f"{min(steps)}..{max(steps)}" if steps else "-",
                 f"{final_ret:.4g}" if final_ret is not None else "-",
                 f"{best[0]:.4g} ({best[1]}){' *' if partial else ''}" if best else "-",
                 f"{final_len:.4g}" if final_len is not None else "-",
                 str(datetime.timedelta(seconds=round(secs))) if secs else "-", str(len(r.findings))]
        rows.append("<tr>" + "".join(f'<td class="num">{c}</td>' if i >= 3 else f"<td>{c}</td>"
                                     for i, c in enumerate(cells)) + "</tr>")
    note = ("<p>* this run's return curve averages partial episodes too (logged by rsl_rl or an older rlcore): envs "
            "start at random points of their episodes, and again after a resume, so its first values and those "
            "after a resume are not comparable with the rest. rlcore's <code>Episode/mean_return</code> now counts "
            "full episodes only.</p>") if legacy else ""
    return "".join(rows) + "</table>" + note


def _findings_html(runs: list[Run]) -> str:
    out = []
    for r in runs:
        if len(runs) > 1:
            out.append(f"<h3>{html.escape(r.name)}</h3>")
        if not r.findings:
            out.append('<p class="ok">No problem found in the curves.</p>')
        for f in r.findings:
            out.append(
                f'<div class="finding {f.severity}" data-rule="{f.rule}"><span class="sev">{f.severity}</span>'
                f'<b>{html.escape(f.rule.replace("_", " "))}</b> at iteration {f.iteration} on '
                f'<a href="#{_anchor(f.tag)}"><code>{html.escape(f.tag)}</code></a>: {html.escape(f.message)}'
                f"<br><i>Try:</i> {html.escape(f.suggestion)}</div>")
    return "".join(out)


def _config_html(runs: list[Run]) -> str:
    if len(runs) == 1:
        flat = flatten(runs[0].config)
        if not flat:
            return "<p>The run has no config.yaml.</p>"
        rows = "".join(f"<tr><td><code>{html.escape(k)}</code></td><td><code>{html.escape(v)}</code></td></tr>"
                       for k, v in flat.items())
        return (f"<p>One run: nothing to compare.</p><details><summary>Its config ({len(flat)} keys)</summary>"
                f"<table>{rows}</table></details>")
    diff = config_differences(runs)
    if not diff:
        return "<p>The runs' configs are identical.</p>"
    head = "".join(f"<th>{html.escape(r.name)}</th>" for r in runs)
    rows = "".join("<tr><td><code>" + html.escape(k) + "</code></td>"
                   + "".join(f"<td><code>{html.escape(v)}</code></td>" for v in vals) + "</tr>" for k, vals in diff)
    return f"<p>{len(diff)} key(s) differ.</p><table><tr><th>key</th>{head}</tr>{rows}</table>"


def build_html(runs: list[Run]) -> str:
    """The report page for ``runs`` (named, with findings)."""
    groups = group_runs(runs)
    colors = {id(g): COLORS[i % len(COLORS)] for i, (_, g) in enumerate(groups)}
    tags = sorted({t for r in runs for t, pts in r.scalars.items() if pts}, key=_tag_key)
    charts: dict[str, list[str]] = {title: [] for title, _ in SECTIONS}
    hover_data = []
    for tag in tags:
        series = []
        for label, group in groups:
            curves = [r.scalars[tag] for r in group if r.scalars.get(tag)]
            if not curves:
                continue
            x, mean, lo, hi = aggregate(curves)
            band = len(curves) > 1
            series.append(Series(label, colors[id(group)], x, mean, lo if band else None, hi if band else None))
        markers = [f for r in runs for f in r.findings if f.tag == tag]
        svg, hover = render_chart(len(hover_data), tag, series, markers)
        hover_data.append(hover)
        last = ", ".join(f"{s.y[-1]:.4g}" for s in series if s.y)
        card = (f'<div class="card" id="{_anchor(tag)}"><h4>{html.escape(tag)}</h4>'
                f'<div class="last">last: {html.escape(last)}</div>{svg}</div>')
        charts[next(title for title, test in SECTIONS if test(tag))].append(card)
    legend = ""
    if len(groups) > 1 or any(len(g) > 1 for _, g in groups):
        legend = '<p class="legend">' + "".join(
            f'<span><i style="background:{colors[id(g)]}"></i>{html.escape(label)}</span>' for label, g in groups)
        legend += ("<br><small>Groups of several runs: their mean, with the min-max band.</small>"
                   if any(len(g) > 1 for _, g in groups) else "") + "</p>"
    names = ", ".join(r.name for r in runs)
    sections = "".join(f'<h3>{title}</h3><div class="grid-charts">{"".join(cards)}</div>'
                       for title, cards in charts.items() if cards)
    data = json.dumps(hover_data, separators=(",", ":")).replace("</", "<\\/")
    n_find = sum(len(r.findings) for r in runs)
    return (
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>rlcore report: {html.escape(names[:120])}</title><style>{CSS}</style></head><body>"
        f"<h1>Training report</h1><p class=\"meta\">{len(runs)} run(s): {html.escape(names)}<br>"
        f"rlcore {html.escape(rlcore.__version__)}, written {datetime.datetime.now():%Y-%m-%d %H:%M}</p>"
        f"<h2>Runs</h2>{_summary_table(runs)}"
        f"<h2>Diagnosis ({n_find} finding{'s' if n_find != 1 else ''})</h2>{_findings_html(runs)}"
        f"<h2>Config differences</h2>{_config_html(runs)}"
        f"<h2>Curves</h2>{legend}{sections}"
        f'<div id="tip" hidden></div><script type="application/json" id="report-data">{data}</script>'
        f"<script>{JS}</script></body></html>")
