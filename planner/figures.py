"""Figures of plans, frontiers, schedules and deployments: one definition each, drawn
from the documents the planner already writes.

Why Vega-Lite (built with Altair): one declarative spec gives both outputs the
project needs. `vl-convert-python` renders it to SVG/PNG in-process (a bundled Deno
runtime, no browser, no Node) for `planner plot`, and the same spec is drawn
interactively in the web UI by vega-embed, whose JavaScript `vl_convert` also ships
(`javascript_bundle()`), so the service serves it from an installed package: fully
offline, no CDN, no vendored minified files to keep in step. matplotlib would need a
second, hand-written browser version of every figure; Plotly's offline bundle is
3.5 MB and has no bundled static renderer without Chrome (kaleido).

Pure: documents (pydantic models or their JSON dicts) in, an Altair chart out; no
service, no solver. `spec()` is the Vega-Lite JSON a page embeds, `render()` the
bytes `planner plot` writes.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, Iterable, Literal

import altair as alt
from pydantic import BaseModel, ConfigDict, Field

from planner.core.multiapp import config_key
from planner.core.schema import Plan, Schedule

# The Vega-Lite version Altair writes; the renderer and the browser bundle use the same.
VL_VERSION = ".".join(alt.SCHEMA_VERSION.lstrip("v").split(".")[:2])

WIDTH = 640
DEVICE_SCHEME = "tableau10"
VALID = "meets the request"
VIOLATES = "breaks the request"
SCHEDULABLE = {True: "schedulable", False: "misses a deadline"}


# --------------------------------------------------------------------------- helpers


def _dump(doc: Any) -> dict:
    return doc.model_dump(mode="json") if hasattr(doc, "model_dump") else dict(doc)


def _fmt(x: float | None, digits: int = 4) -> str:
    return "-" if x is None else f"{x:.{digits}g}"


def _wrapped(lines: Iterable[str], width: int = WIDTH, px_per_char: float = 6.2) -> list[str]:
    """Caption lines broken to the chart's width (Vega never wraps a title: one long line
    widened a schedule figure to 3878 px and shrank its text to about 7 px on screen)."""
    import textwrap

    chars = max(40, int(width / px_per_char))
    return [part for line in lines for part in (textwrap.wrap(line, chars, break_on_hyphens=False) or [""])]


def _title(text: str, subtitle: Iterable[str] = (), width: int = WIDTH) -> alt.TitleParams:
    return alt.TitleParams(text=text, subtitle=_wrapped(subtitle, width), anchor="start", fontSize=15,
                           subtitleFontSize=11, subtitleColor="#444")


def _config(cpu_config: dict[str, list[int]]) -> str:
    """{"cpu": [2, 2]} -> 'cpu=(2,2)' (cores per logical PE of each cluster)."""
    return ", ".join(f"{k}=({','.join(map(str, v))})" for k, v in cpu_config.items()) or "none"


def _device_colour(devices: list[str]) -> alt.Scale:
    """One colour per device, in the order given, the same in every panel of a figure."""
    return alt.Scale(domain=devices, scheme=DEVICE_SCHEME)


# --------------------------------------------------------------------------- plan


def plan_figure(plan: Plan | dict, *, width: int = WIDTH) -> alt.VConcatChart:
    """The layer strip (one cell per layer, coloured by device, slices outlined and
    labelled with their target = device letter @ MHz), per-slice time and energy on the
    same layer axis, and the plan beside its alternatives in latency x energy (an
    alternative that breaks the request's constraints is a red cross)."""
    p = _dump(plan)
    slices, layers, m = p["slices"], p["layers"], p["metrics"]
    n_layers = len(layers)
    # legend entries read "N = npu": the letter the notation uses (the target's prefix) and the device id
    letter = {s["device"]: s["target"].split("@")[0].split("/")[0] for s in slices}
    label = {d: f"{letter[d]} = {d}" if letter[d] and letter[d] != d else d for d in letter}
    devices = [label[d] for d in dict.fromkeys(s["device"] for s in slices)]
    colour = _device_colour(devices)
    device_legend = alt.Legend(title="device (letter)", orient="right")  # one legend: the panels share the scale
    x = alt.Scale(domain=[0, max(n_layers, 1)], nice=False, zero=True)
    # a layer is the cell [i, i+1): ticks at cell centres, labelled 1-based as in the notation
    centres = {"values": [i + 0.5 for i in range(n_layers)]} if n_layers <= 40 else {}
    x_axis = alt.Axis(title="layer (1-based: the number in the notation)", tickMinStep=1,
                      labelExpr="floor(datum.value) + 1", grid=False, **centres)

    layer_rows = [{"index": i, "end": i + 1, "layer": r["layer"], "device": label.get(r["device"], r["device"]), "target": r["target"],
                   "slice": r["slice"], "freq_mhz": r["freq_mhz"], "time_ms": r["time_ms"], "energy_mj": r["energy_mj"]}
                  for i, r in enumerate(layers)]
    min_label_layers = max(1, n_layers * 46 / width)  # a label needs ~46 px
    slice_rows = [{"slice": s["index"], "start": s["first_index"], "end": s["last_index"] + 1,
                   "mid": (s["first_index"] + s["last_index"] + 1) / 2, "device": label[s["device"]], "target": s["target"],
                   "layers": f"{s['first_layer']} .. {s['last_layer']}", "n": s["last_index"] - s["first_index"] + 1,
                   "time_ms": s["time_ms"], "energy_mj": s["energy_mj"],
                   "comm_ms": s["comm_in_time_ms"] + s["comm_out_time_ms"],
                   "label": s["target"] if s["last_index"] - s["first_index"] + 1 >= min_label_layers else ""}
                  for s in slices]

    layer_tip = [alt.Tooltip("index:Q", title="index (0-based)"), "layer:N", "target:N", "slice:Q",
                 alt.Tooltip("time_ms:Q", title="time (ms)", format=".4g"),
                 alt.Tooltip("energy_mj:Q", title="energy (mJ)", format=".4g")]
    slice_tip = ["slice:Q", "target:N", "layers:N", alt.Tooltip("n:Q", title="layers"),
                 alt.Tooltip("time_ms:Q", title="time incl. transfers (ms)", format=".4g"),
                 alt.Tooltip("comm_ms:Q", title="transfers in+out (ms)", format=".4g"),
                 alt.Tooltip("energy_mj:Q", title="energy (mJ)", format=".4g")]
    lay = alt.Data(values=layer_rows)
    sl = alt.Data(values=slice_rows)

    strip = alt.Chart(lay).mark_rect(stroke="white", strokeWidth=0.3 if n_layers < 200 else 0).encode(
        x=alt.X("index:Q", scale=x, axis=None), x2="end:Q",
        color=alt.Color("device:N", scale=colour, legend=device_legend),
        tooltip=layer_tip,
    )
    bounds = alt.Chart(sl).mark_rect(fill=None, stroke="black", strokeWidth=1.5).encode(
        x=alt.X("start:Q", scale=x), x2="end:Q", tooltip=slice_tip)
    labels = alt.Chart(sl).mark_text(dy=-20, fontSize=11, fontWeight="bold").encode(
        x=alt.X("mid:Q", scale=x), text="label:N")
    strip_chart = (strip + bounds + labels).properties(
        width=width, height=26, title=alt.TitleParams("layers, by slice (label: target = device @ MHz)", fontSize=12,
                                                      anchor="start", offset=22))

    time_only = m["energy_mj"] is None  # a time-only profile (no power source): no energy to draw
    bottom = "time_ms" if time_only else "energy_mj"

    def per_slice(field: str, title: str, fmt: str) -> alt.LayerChart:
        bars = alt.Chart(sl).mark_rect(stroke="black", strokeWidth=0.6, opacity=0.85).encode(
            x=alt.X("start:Q", scale=x, axis=x_axis if field == bottom else alt.Axis(title=None, labels=False, ticks=False)),
            x2="end:Q", y=alt.Y(f"{field}:Q", title=title), y2=alt.datum(0),
            color=alt.Color("device:N", scale=colour, legend=device_legend), tooltip=slice_tip)
        text = alt.Chart(sl).transform_filter("datum.label != ''").mark_text(dy=-6, fontSize=10).encode(
            x=alt.X("mid:Q", scale=x), y=alt.Y(f"{field}:Q"), text=alt.Text(f"{field}:Q", format=fmt))
        return (bars + text).properties(width=width, height=110)

    panels = [strip_chart, per_slice("time_ms", "slice time (ms)", ".3g")]
    if not time_only:
        panels.append(per_slice("energy_mj", "slice energy (mJ)", ".3g"))
    left = alt.vconcat(*panels, spacing=6)
    if time_only:
        return _time_only_plan(p, m, left)

    right, alts = _alternatives_panel(p, m)

    constraint = ""
    if any(a["verdict"] == VIOLATES for a in alts):
        constraint = "; a red cross breaks the request (hover for why)"
    subtitle = [
        f"objective: {p['objective']}; solver {p['report']['solver']} ({p['report']['status']}); "
        f"latency {_fmt(m['latency_ms'])} ms, energy {_fmt(m['energy_mj'])} mJ, {m['slices']} slices, "
        f"{m['transitions']} transitions",
        "notation: device letter + first layer of each slice (1-based), @MHz = DVFS level; slice time includes its "
        "tensor transfers" + constraint,
    ]
    right = _with_verification(right, p)
    return alt.hconcat(left, right, spacing=30).resolve_scale(color="independent", shape="independent").properties(
        title=_title(f"{p['model']} on {p['platform']}: {p['notation']}", subtitle))


def _alternatives_panel(p: dict, m: dict) -> tuple[alt.LayerChart, list[dict]]:
    """The plan beside its alternatives in latency x energy (baselines that found the same
    plan share a point; one that breaks the request is a red cross), and those points."""
    alts = [{"name": "this plan", "notation": p["notation"], "latency_ms": m["latency_ms"], "energy_mj": m["energy_mj"],
             "verdict": "this plan", "why": "", "saving": ""}]
    same: dict[tuple, dict] = {}  # baselines that found the same plan share one point and one label
    for c in p.get("comparisons", []):
        broken = c.get("violations") or []
        key = (c["notation"], round(c["latency_ms"], 9), round(c["energy_mj"], 9))
        if key in same:
            same[key]["name"] += f", {c['name']}"
            continue
        same[key] = {"name": c["name"], "notation": c["notation"], "latency_ms": c["latency_ms"],
                     "energy_mj": c["energy_mj"], "verdict": VIOLATES if broken else VALID, "why": "; ".join(broken),
                     "saving": f"{c['saving_pct']:.1f}%"}
        alts.append(same[key])
    verdicts = ["this plan", VALID, VIOLATES]
    dom_l, dom_e = _declutter(alts)
    base = alt.Chart(alt.Data(values=alts)).encode(
        x=alt.X("latency_ms:Q", title="latency (ms)", scale=alt.Scale(domain=dom_l, nice=False, zero=False)),
        y=alt.Y("energy_mj:Q", title="energy (mJ)", scale=alt.Scale(domain=dom_e, nice=False, zero=False)),
        tooltip=["name:N", "notation:N", alt.Tooltip("latency_ms:Q", format=".4g"), alt.Tooltip("energy_mj:Q", format=".4g"),
                 alt.Tooltip("saving:N", title=f"plan saves ({p['objective']})"), alt.Tooltip("why:N", title="breaks")])
    points = base.mark_point(size=110, filled=True).encode(
        shape=alt.Shape("verdict:N", scale=alt.Scale(domain=verdicts, range=["diamond", "circle", "cross"]),
                        legend=alt.Legend(title="alternative", orient="right")),
        color=alt.Color("verdict:N", scale=alt.Scale(domain=verdicts, range=["#111111", "#2a9d3a", "#d62728"]),
                        legend=alt.Legend(title="alternative", orient="right")))
    names = alt.layer(*[
        base.transform_filter((alt.datum.align == align) & (alt.datum.dy == dy))
        .mark_text(align=align, fontSize=10, dx=dx, dy=dy).encode(text="label:N")
        for align, dx, dy in sorted({(a["align"], a["dx"], a["dy"]) for a in alts if a["label"]})])
    right = (points + names).properties(width=260, height=230, title=alt.TitleParams(
        "the plan and its alternatives", subtitle=["baselines scored by the same evaluator"], fontSize=12, anchor="start"))
    return right, alts


def _time_only_plan(p: dict, m: dict, left) -> alt.HConcatChart:
    """A plan whose profile has no energy: its slices beside the alternatives' latency."""
    alts = [{"name": "this plan", "notation": p["notation"], "latency_ms": m["latency_ms"]}]
    alts += [{"name": c["name"], "notation": c["notation"], "latency_ms": c["latency_ms"]} for c in p.get("comparisons", [])]
    right = alt.Chart(alt.Data(values=alts)).mark_bar().encode(
        x=alt.X("latency_ms:Q", title="latency (ms)"), y=alt.Y("name:N", title=None, sort=None),
        color=alt.condition(alt.datum.name == "this plan", alt.value("#111111"), alt.value("#2a9d3a")),
        tooltip=["name:N", "notation:N", alt.Tooltip("latency_ms:Q", format=".4g")],
    ).properties(width=260, height=max(60, 18 * len(alts)), title=alt.TitleParams(
        "the plan and its alternatives", subtitle=["energy not measured (no power source)"], fontSize=12, anchor="start"))
    subtitle = [
        f"objective: {p['objective']}; solver {p['report']['solver']} ({p['report']['status']}); "
        f"latency {_fmt(m['latency_ms'])} ms, energy not measured, {m['slices']} slices, {m['transitions']} transitions",
        "notation: device letter + first layer of each slice (1-based); slice time includes its tensor transfers",
    ]
    right = _with_verification(right, p)
    return alt.hconcat(left, right, spacing=30).resolve_scale(color="independent").properties(
        title=_title(f"{p['model']} on {p['platform']}: {p['notation']}", subtitle))


def _with_verification(right, p: dict):  # noqa: ANN001, ANN202 - Altair charts
    """Below the alternatives, a verified plan's candidates: predicted beside measured
    on the device (bar: the statistic; whisker: p10..p90), the returned one marked."""
    v = p.get("verification")
    if not v:
        return right
    rows = []
    for c in v["candidates"]:
        name = c["name"] + (" (returned)" if c["name"] == v["chosen"] else "")
        rows.append({"candidate": name, "notation": c["notation"], "what": "predicted", "ms": c["predicted_ms"],
                     "lo": None, "hi": None, "error": f"{c['error_pct']:+.1f}%"})
        rows.append({"candidate": name, "notation": c["notation"], "what": "measured", "ms": c["measured_ms"],
                     "lo": c["measured_p10_ms"], "hi": c["measured_p90_ms"], "error": f"{c['error_pct']:+.1f}%"})
    data = alt.Data(values=rows)
    what = alt.Scale(domain=["predicted", "measured"], range=["#9ecae1", "#08519c"])
    y = alt.Y("candidate:N", title=None, sort=None)
    tip = ["candidate:N", "notation:N", "what:N", alt.Tooltip("ms:Q", format=".4g"),
           alt.Tooltip("error:N", title="(measured - predicted) / predicted")]
    bars = alt.Chart(data).mark_bar().encode(
        x=alt.X("ms:Q", title="latency (ms)"), y=y, yOffset="what:N",
        color=alt.Color("what:N", scale=what, legend=alt.Legend(title="verified", orient="right")), tooltip=tip)
    whiskers = alt.Chart(data).transform_filter("datum.lo != null").mark_rule().encode(
        x="lo:Q", x2="hi:Q", y=y, yOffset="what:N")
    regime = v["regime"]
    how = f"at {regime['rate_hz']:g} Hz" if regime.get("mode") == "rate" else "back to back"
    panel = (bars + whiskers).properties(width=260, height=max(60, 30 * len(v["candidates"])), title=alt.TitleParams(
        "verified on the device", subtitle=[f"{v['statistic']} of {v['runs']} runs, {how}; whisker p10..p90"],
        fontSize=12, anchor="start"))
    return alt.vconcat(right, panel, spacing=20)


def _declutter(points: list[dict], width: float = 260, height: float = 230,
               near: float = 0.02) -> tuple[list[float], list[float]]:
    """Sets each point's `label` and where it goes (`dx`, `dy`, `align`): points closer
    than `near` of the axes' spans share one label listing every name, and each label
    takes the first of right / left / below / above where its box (estimated at 5.5 px a
    character) overlaps no label placed before it. Returns the axes' domains it assumed."""
    lat = [p["latency_ms"] for p in points]
    en = [p["energy_mj"] for p in points]
    span_l = (max(lat) - min(lat)) or max(lat) or 1.0
    span_e = (max(en) - min(en)) or max(en) or 1.0
    heads: list[dict] = []
    for p in points:
        head = next((h for h in heads if abs(h["latency_ms"] - p["latency_ms"]) / span_l < near
                     and abs(h["energy_mj"] - p["energy_mj"]) / span_e < near), None)
        if head is None:
            p["label"] = p["name"]
            heads.append(p)
        else:
            head["label"] += f", {p['name']}"
            p["label"] = ""
    # the axes' domains, 8% wider than the data: the chart uses these, so pixels are known
    lo_l, lo_e = min(lat) - 0.08 * span_l, min(en) - 0.08 * span_e
    dom_l, dom_e = [lo_l, lo_l + 1.16 * span_l], [lo_e, lo_e + 1.16 * span_e]
    span_l, span_e = 1.16 * span_l, 1.16 * span_e

    def px(p: dict) -> tuple[float, float]:
        return (p["latency_ms"] - lo_l) / span_l * width, (1 - (p["energy_mj"] - lo_e) / span_e) * height

    boxes = [(x - 6, y - 6, x + 6, y + 6) for x, y in map(px, points)]  # labels keep off the points too
    for p in points:
        p.update(dx=8, dy=-4, align="left")
        if not p["label"]:
            continue
        x, y = px(p)
        w, h = 5.5 * len(p["label"]), 12.0
        options = [(8, -4, "left", x + 8, y - 10), (-8, -4, "right", x - 8 - w, y - 10),
                   (6, -13, "left", x + 6, y - 22), (6, 14, "left", x + 6, y + 4),
                   (0, 14, "center", x - w / 2, y + 6), (0, -14, "center", x - w / 2, y - 22)]
        for dx, dy, align, bx, by in options:
            inside = bx >= 0 and by >= -6 and by + h <= height + 6  # not over the axes
            if inside and not any(bx < b[2] and b[0] < bx + w and by < b[3] and b[1] < by + h for b in boxes):
                break
        else:
            dx, dy, align, bx, by = options[0]
        boxes.append((bx, by, bx + w, by + h))
        p.update(dx=dx, dy=dy, align=align)
    return dom_l, dom_e


# --------------------------------------------------------------------------- frontier


def chosen_point(frontier: dict, energy_cap_mj: float | None = None) -> dict | None:
    """The frontier point a latency request picks: the fastest plan within the cap
    (without a cap, the fastest plan of all); None when no plan meets the cap."""
    ok = [p for p in frontier["frontier"] if energy_cap_mj is None or p["energy_mj"] <= energy_cap_mj]
    return min(ok, key=lambda p: (p["latency_ms"], p["energy_mj"]), default=None)


def frontier_figure(frontier: dict, *, energy_cap_mj: float | None = None, chosen: dict | None = None,
                    width: int = 420) -> alt.HConcatChart:
    """Left: the exact latency-energy Pareto frontier (every non-dominated plan), each
    device alone, and the chosen point. Right: AxoNN's energy-cap sweep (Fig. 6): for
    each cap the latency of the best plan under it. `chosen` (latency_ms, energy_mj,
    plan) overrides the point picked by `energy_cap_mj`."""
    f = frontier
    pick = chosen if chosen is not None else chosen_point(f, energy_cap_mj)
    pts = [{**p, "kind": "frontier plan"} for p in sorted(f["frontier"], key=lambda p: p["latency_ms"])]
    ends: dict[tuple, dict] = {}  # devices alone that give the same point share one label
    for d, p in f.get("endpoints", {}).items():
        key = (round(p["latency_ms"], 9), round(p["energy_mj"], 9))
        if key in ends:
            ends[key]["kind"] += f", {d}"
        else:
            ends[key] = {**p, "kind": f"all on {d}"}
    kinds = ["frontier plan", "single device", "chosen"]
    tip = [alt.Tooltip("plan:N"), alt.Tooltip("latency_ms:Q", title="latency (ms)", format=".4g"),
           alt.Tooltip("energy_mj:Q", title="energy (mJ)", format=".4g"), alt.Tooltip("transitions:Q")]
    xs = alt.X("latency_ms:Q", title="latency (ms)", scale=alt.Scale(zero=False, nice=True))
    ys = alt.Y("energy_mj:Q", title="energy (mJ)", scale=alt.Scale(zero=False, nice=True))
    kind_colour = alt.Scale(domain=kinds, range=["#1f77b4", "#7f7f7f", "#d62728"])
    kind_shape = alt.Scale(domain=kinds, range=["circle", "square", "diamond"])
    # below the plot, not inside it: a legend in a corner covered the energy-cap line there
    kind_legend = alt.Legend(title="point", orient="bottom", direction="horizontal")
    line = alt.Chart(alt.Data(values=pts)).mark_line(interpolate="step-after", color="#1f77b4", opacity=0.6).encode(x=xs, y=ys)
    dots = alt.Chart(alt.Data(values=pts)).mark_point(filled=True, size=30).encode(
        x=xs, y=ys, tooltip=tip,
        color=alt.Color("kind:N", scale=kind_colour, legend=kind_legend),
        shape=alt.Shape("kind:N", scale=kind_shape, legend=kind_legend))
    layers: list[alt.Chart] = [line, dots]
    if ends:
        end_rows = [{**e, "kind": "single device", "label": e["kind"]} for e in ends.values()]
        e = alt.Chart(alt.Data(values=end_rows))
        layers += [e.mark_point(filled=True, size=90).encode(x=xs, y=ys, tooltip=tip, color=alt.Color("kind:N", scale=kind_colour, legend=kind_legend),
                                                             shape=alt.Shape("kind:N", scale=kind_shape, legend=kind_legend)),
                   e.mark_text(align="left", dx=8, fontSize=10).encode(x=xs, y=ys, text="label:N")]
    if pick is not None:
        c = alt.Chart(alt.Data(values=[{**pick, "kind": "chosen", "label": f"chosen: {pick['plan']}"}]))
        layers += [c.mark_point(filled=True, size=220).encode(x=xs, y=ys, tooltip=tip, color=alt.Color("kind:N", scale=kind_colour, legend=kind_legend),
                                                              shape=alt.Shape("kind:N", scale=kind_shape, legend=kind_legend)),
                   c.mark_text(align="left", dx=12, dy=12, fontSize=11, fontWeight="bold", color="#d62728").encode(
                       x=xs, y=ys, text="label:N")]
    if energy_cap_mj is not None:
        layers.append(alt.Chart(alt.Data(values=[{"cap": energy_cap_mj}])).mark_rule(strokeDash=[5, 3], color="#d62728").encode(
            y="cap:Q", tooltip=[alt.Tooltip("cap:Q", title="energy cap (mJ)")]))
    left = alt.layer(*layers).properties(width=width, height=300, title=alt.TitleParams(
        f"Pareto frontier: {len(pts)} non-dominated plans", subtitle=["step line: best energy at each latency"],
        fontSize=12, anchor="start"))

    sweep = [{**r, "status": "feasible" if r.get("feasible") else "no plan under this cap"} for r in f.get("sweep", [])]
    feas = [r for r in sweep if r.get("feasible")]
    s_tip = [alt.Tooltip("cap_mj:Q", title="energy cap (mJ)", format=".4g"),
             alt.Tooltip("latency_ms:Q", title="best latency (ms)", format=".4g"),
             alt.Tooltip("energy_mj:Q", title="its energy (mJ)", format=".4g"), "plan:N", "transitions:Q"]
    sx = alt.X("cap_mj:Q", title="energy cap (mJ)", scale=alt.Scale(zero=False, nice=True))
    sy = alt.Y("latency_ms:Q", title="best latency under the cap (ms)", scale=alt.Scale(zero=False, nice=True))
    # the exact answer for every cap, from the frontier: the fastest plan using at most that energy
    exact = [{"cap_mj": p["energy_mj"], "latency_ms": p["latency_ms"], "energy_mj": p["energy_mj"], "plan": p["plan"],
              "transitions": p["transitions"]} for p in sorted(pts, key=lambda p: p["energy_mj"])]
    s_layers: list[alt.Chart] = [
        alt.Chart(alt.Data(values=exact)).mark_line(interpolate="step-after", color="#bbbbbb").encode(
            x=sx, y=sy, tooltip=s_tip),
        alt.Chart(alt.Data(values=feas)).mark_point(filled=True, size=55, color="#9467bd").encode(
            x=sx, y=sy, tooltip=s_tip)]
    if pick is not None and energy_cap_mj is not None:
        s_layers.append(alt.Chart(alt.Data(values=[{"cap_mj": energy_cap_mj, **{k: pick[k] for k in ("latency_ms", "energy_mj", "plan", "transitions")}}]))
                        .mark_point(shape="diamond", filled=True, size=200, color="#d62728").encode(x=sx, y=sy, tooltip=s_tip))
    bad = [r for r in sweep if not r.get("feasible")]
    if bad and feas:
        top = max(r["latency_ms"] for r in feas)
        s_layers.append(alt.Chart(alt.Data(values=[{**r, "latency_ms": top} for r in bad])).mark_point(
            shape="cross", color="#d62728", size=90).encode(x=sx, y=sy, tooltip=[s_tip[0], "status:N"]))
    rng = f.get("sweep_range") or {}
    right = alt.layer(*s_layers).properties(width=width - 60, height=300, title=alt.TitleParams(
        "energy-cap sweep (AxoNN Fig. 6)", subtitle=[f"dots: {len(sweep)} caps from {rng.get('basis', 'the frontier')}"
                                                     + ("; red cross: no plan" if bad else ""),
                                                     "grey step: the exact answer for every cap"],
        fontSize=12, anchor="start"))
    k = "unlimited" if f.get("max_transitions") is None else f["max_transitions"]
    chosen_txt = ("no plan meets the cap" if pick is None else
                  f"chosen ({'fastest under ' + _fmt(energy_cap_mj) + ' mJ' if energy_cap_mj is not None and chosen is None else 'fastest' if chosen is None else 'the plan'}): "
                  f"{pick['plan']}, {_fmt(pick['latency_ms'])} ms, {_fmt(pick['energy_mj'])} mJ")
    subtitle = [f"devices {', '.join(f.get('devices', []))}; targets {f.get('targets', '?')}; transitions <= {k}; {chosen_txt}",
                "a point = one plan (notation: device letter + first layer, @MHz); every number from the one evaluator"]
    return alt.hconcat(left, right, spacing=40).properties(
        title=_title(f"{f['model']} on {f['platform']}: latency-energy frontier", subtitle))


# --------------------------------------------------------------------------- schedule


def _pareto_panel(s: dict, entry: int, width: int) -> alt.FacetChart:
    """The schedule's Pareto set, each non-energy objective against energy, coloured by
    schedulability, the drawn entry ringed."""
    entries = s["entries"]
    throughput = s["mode"] == "throughput"
    names = s["objective_names"]
    energy_i = names.index("energy_mj") if "energy_mj" in names else len(names) - 1
    front = []
    for i, en in enumerate(entries):
        for j, name in enumerate(names):
            if j == energy_i:
                continue
            front.append({"entry": i, "objective": name, "value": en["objectives"][j],
                          "energy_mj": en["objectives"][energy_i], "verdict": SCHEDULABLE[bool(en["schedulable"])],
                          "config": _config(en["cpu_config"]),
                          "drawn": i == entry})
    panel_w = max(160, (width - 40 * (len(names) - 2)) // max(1, len(names) - 1))
    base = alt.Chart(alt.Data(values=front)).encode(
        x=alt.X("value:Q", title=None, scale=alt.Scale(zero=False, nice=True)),
        y=alt.Y("energy_mj:Q", title="energy (mJ)", scale=alt.Scale(zero=False, nice=True)))
    pts = base.mark_point(filled=True, size=24, opacity=0.75).encode(
        color=alt.Color("verdict:N", scale=alt.Scale(domain=list(SCHEDULABLE.values()), range=["#2a9d3a", "#d62728"]),
                        legend=alt.Legend(title="entry", orient="right")),
        tooltip=["entry:Q", "objective:N", alt.Tooltip("value:Q", format=".4g"), alt.Tooltip("energy_mj:Q", format=".4g"),
                 "verdict:N", "config:N"])
    ring = base.transform_filter("datum.drawn").mark_point(size=260, strokeWidth=2, color="black", shape="circle")
    objective_help = ("period_ms: pipeline period (1000/period = frames/s)" if throughput
                      else "response_ms[network]: worst-case response time (ms)")
    pareto = alt.layer(pts, ring).properties(width=panel_w, height=200).facet(
        column=alt.Column("objective:N", sort=[n for j, n in enumerate(names) if j != energy_i],
                          header=alt.Header(title=None, labelFontWeight="bold")),
    ).resolve_scale(x="independent").properties(title=alt.TitleParams(
        f"Pareto set: {len(entries)} entries" + (f" of {s['front_size']}" if s.get("front_size", len(entries)) != len(entries) else ""),
        subtitle=_wrapped([f"each objective against energy per inference of every network; {objective_help}; "
                           f"ringed: entry {entry}"], width),
        fontSize=12, anchor="start"))
    return pareto


def schedule_figure(schedule: Schedule | dict, *, entry: int = 0, width: int = WIDTH) -> alt.VConcatChart:
    """Top: the per-PE timeline of one Pareto entry (each network's layers from its
    release, ASAP; dashed rule: its period = deadline; a layer whose slack is negative,
    i.e. whose interference + blocking exceeds its mobility, is outlined red).
    Bottom: the Pareto set, each non-energy objective against energy, coloured by
    schedulability, the drawn entry ringed."""
    s = _dump(schedule)
    entries = s["entries"]
    if not entries:
        raise ValueError("the schedule has no entries (an empty Pareto set): nothing to draw")
    if not 0 <= entry < len(entries):
        raise ValueError(f"entry {entry} is out of range: the schedule has {len(entries)} entries (0..{len(entries) - 1})")
    e = entries[entry]
    apps = [a["name"] for a in e["apps"]]
    app_colour = alt.Scale(domain=apps, scheme="set2")
    app_legend = alt.Legend(title="network", orient="right")
    throughput = s["mode"] == "throughput"
    charts = []
    if e.get("timeline"):
        rows = []
        for pe, items in e["timeline"].items():
            for it in items:
                late = it.get("slack_ms") is not None and it["slack_ms"] < -1e-9
                rows.append({"pe": pe, **it, "late": "slack < 0" if late else "ok",
                             "alap": it.get("alap_start_ms")})
        marks = []
        for a in e["apps"]:
            period = a.get("effective_period_ms") or a.get("pipeline_period_ms") if throughput else a["period_ms"]
            if period:
                marks.append({"app": a["name"], "t": period,
                              "what": "pipeline period" if throughput else "period = deadline",
                              "response": a.get("response_time_ms")})
        pes = e["pes"]
        x = alt.X("start_ms:Q", title="time from release (ms)")
        tip = ["app:N", "layer:N", "pe:N", alt.Tooltip("start_ms:Q", title="start (ms)", format=".4g"),
               alt.Tooltip("finish_ms:Q", title="finish (ms)", format=".4g"),
               alt.Tooltip("alap:Q", title="latest start (ms)", format=".4g"),
               alt.Tooltip("interference_ms:Q", title="interference + blocking (ms)", format=".4g"),
               alt.Tooltip("slack_ms:Q", title="slack (ms)", format=".4g")]
        bars = alt.Chart(alt.Data(values=rows)).mark_bar(cornerRadius=1).encode(
            x=x, x2="finish_ms:Q",
            y=alt.Y("pe:N", title="processing element", sort=pes, scale=alt.Scale(domain=pes)),
            yOffset=alt.YOffset("app:N", sort=apps),
            color=alt.Color("app:N", scale=app_colour, legend=app_legend),
            stroke=alt.Stroke("late:N", scale=alt.Scale(domain=["ok", "slack < 0"], range=["#ffffff", "#d62728"]),
                              legend=alt.Legend(title="layer", orient="right", symbolFillColor="#dddddd", symbolStrokeWidth=2)),
            strokeWidth=alt.condition("datum.late != 'ok'", alt.value(2), alt.value(0.4)),
            tooltip=tip)
        layers: list[alt.Chart] = [bars]
        if marks:
            layers.append(alt.Chart(alt.Data(values=marks)).mark_rule(strokeDash=[6, 3], strokeWidth=1.5).encode(
                x="t:Q", color=alt.Color("app:N", scale=app_colour, legend=app_legend),
                tooltip=["app:N", "what:N", alt.Tooltip("t:Q", title="ms", format=".4g"),
                         alt.Tooltip("response:Q", title="response time (ms)", format=".4g")]))
        resp = [{"app": a["name"], "t": a["response_time_ms"]} for a in e["apps"] if a.get("response_time_ms") is not None]
        if resp:
            layers.append(alt.Chart(alt.Data(values=resp)).mark_point(shape="triangle-down", size=90, filled=True,
                                                                      yOffset=-6).encode(
                x="t:Q", y=alt.value(0), color=alt.Color("app:N", scale=app_colour, legend=app_legend),
                tooltip=["app:N", alt.Tooltip("t:Q", title="worst-case response time (ms)", format=".4g")]))
        loads = ", ".join(f"{pl['pe']} {100 * pl['utilisation']:.0f}%" for pl in e["pe_loads"])
        an = s.get("analysis") or {}
        if an and e.get("cpu_config") is not None:  # the entry's configuration's own figures where they differ
            an = {**an, **((an.get("by_config") or {}).get(config_key(dict(e["cpu_config"]))) or {})}
        late_txt = ("red outline: the network's response bound exceeds its period" if an.get("name") == "executor"
                    else "red outline: a layer's interference + blocking exceeds its slack")
        bound_txt = ([f"response bound ({an['name']} analysis) includes: " + "; ".join(t.split(":")[0] for t in an["terms"])
                      + (f" (x{an['interference_factor']:.3g}, +{an['release_jitter_ms']:.3g} ms, "
                         f"+{an.get('dispatch_ms', 0):.3g} ms dispatch and +{an.get('segment_excess_ms', 0):.3g} ms excess per segment"
                         + (f", at most {an['excess_curve'][-1][1]:.3g} ms of dispatch waits and excess in all in any {an['excess_curve'][-1][0]:.3g} ms"
                            if an.get("excess_curve") else "") + ")"
                         if an["name"] == "executor" else "")]
                     if an else [])
        charts.append(alt.layer(*layers).properties(
            width=width, height=max(140, min(22 * len(pes) * len(apps), 600)),
            title=alt.TitleParams(f"entry {entry}: per-PE timeline ({'schedulable' if e['schedulable'] else 'NOT schedulable'})",
                                  subtitle=_wrapped(["bars: each network's layers in its own schedule from its release (ASAP); "
                                            "networks sharing a PE are served by priority",
                                            ("dashed rule: pipeline period; " if throughput else
                                             "dashed rule: period = deadline; triangle: worst-case response time; ")
                                            + late_txt, *bound_txt,
                                            f"PE utilisation: {loads}"], width),
                                  fontSize=12, anchor="start")))
    else:
        charts.append(alt.Chart(alt.Data(values=[{"t": f"entry {entry} carries no timeline (request.timelines)"}]))
                      .mark_text(fontSize=12).encode(text="t:N").properties(width=width, height=40))

    pareto = _pareto_panel(s, entry, width)
    rep = s["report"]
    subtitle = [f"mode {s['mode']}; solver {rep['solver']} ({rep['status']}); entry {entry}: "
                f"CPU config {_config(e['cpu_config'])}, "
                f"energy {_fmt(e['energy_mj'])} mJ, CPU utilisation {100 * e['cpu_utilisation']:.0f}%",
                "networks: " + "; ".join(
                    f"{a['name']} period {_fmt(a['period_ms'])} ms, " +
                    (f"pipeline period {_fmt(a.get('effective_period_ms') or a.get('pipeline_period_ms'))} ms"
                     if throughput else f"response {_fmt(a.get('response_time_ms'))} ms")
                    + ("" if a["meets_deadline"] else " (MISSES)") for a in e["apps"])]
    return alt.vconcat(*charts, pareto, spacing=24).resolve_scale(color="independent").properties(
        title=_title(f"{', '.join(apps)} on {s['platform']}: schedule", subtitle, width))


# --------------------------------------------------------------------------- deployment


@dataclass(frozen=True)
class DeploymentPoint:
    """One row of a deployment's history: the plan made active at `time` as `revision`,
    its predicted latency, and what executors measured (None until they report)."""

    plan: str
    revision: int
    time: dt.datetime | str
    predicted_ms: float
    measured_ms: float | None = None


def time_axis(times: list[str]) -> alt.Axis:
    """Labels as fine as the span needs and ticks no finer than the labels: a fixed
    "%Y-%m-%d %H:%M" printed the same minute on every tick of revisions seconds apart."""
    stamps = [dt.datetime.fromisoformat(t.replace("Z", "+00:00")) for t in times if t]
    span_s = (max(stamps) - min(stamps)).total_seconds() if stamps else 0.0
    one_day = len({t.date() for t in stamps}) <= 1
    if span_s < 600 and one_day:
        fmt, step_ms = "%H:%M:%S", 1_000
    elif one_day:
        fmt, step_ms = "%H:%M", 60_000
    else:
        fmt, step_ms = "%Y-%m-%d %H:%M", 60_000
    # labels at least 8 px apart: the chart's room at each end (scale padding) can make
    # the axis choose a step whose labels touch ("10:00:0010:00:02")
    return alt.Axis(format=fmt, tickMinStep=step_ms, labelOverlap=True, labelSeparation=8)


# pixels kept free at each end of the deployment chart's axes: a point's radius (size 70:
# about 4.2 px) and its revision label (10 px text 12 px above it, "r12" about 18 px wide)
POINT_ROOM_X_PX = 12
POINT_ROOM_Y_PX = 24


def deployment_figure(name: str, rows: list[DeploymentPoint | dict], *, width: int = WIDTH) -> alt.LayerChart:
    """Revisions over time (step line of predicted latency, a point per revision) and,
    once executors report, measured latency beside it. Without telemetry only the
    revisions are drawn, and the subtitle says so."""
    data = []
    for r in rows:
        d = dict(r.__dict__) if isinstance(r, DeploymentPoint) else dict(r)
        t = d["time"]
        if isinstance(t, dt.datetime):  # naive = UTC, as the service's rows hold it
            t = (t if t.tzinfo else t.replace(tzinfo=dt.timezone.utc)).astimezone(dt.timezone.utc)
            d["time"] = t.strftime("%Y-%m-%dT%H:%M:%SZ")
        else:
            d["time"] = str(t)
        d["label"] = f"r{d['revision']}"
        data.append(d)
    measured = [{**d, "series": "measured"} for d in data if d.get("measured_ms") is not None]
    predicted = [{**d, "series": "predicted"} for d in data]
    series = alt.Scale(domain=["predicted", "measured"], range=["#1f77b4", "#ff7f0e"])
    series_legend = alt.Legend(title=None, orient="bottom")
    # room inside the frame for the extreme points and the label above the top one: the
    # nice y domain can end exactly at a value and the time axis ends at the first and
    # last revision, which drew half a marker over the axis (issue 38's clipped point)
    x = alt.X("time:T", title="time (UTC)", scale=alt.Scale(type="utc", padding=POINT_ROOM_X_PX),
              axis=time_axis([d["time"] for d in data]))
    tip = [alt.Tooltip("label:N", title="revision"), "plan:N", alt.Tooltip("time:T", format="%Y-%m-%d %H:%M:%S"),
           alt.Tooltip("predicted_ms:Q", title="predicted (ms)", format=".4g"),
           alt.Tooltip("measured_ms:Q", title="measured (ms)", format=".4g")]
    p = alt.Chart(alt.Data(values=predicted))
    layers: list[alt.Chart] = [
        p.mark_line(interpolate="step-after").encode(x=x, y=alt.Y("predicted_ms:Q", title="latency (ms)",
                                                                  scale=alt.Scale(zero=False, nice=True,
                                                                                  padding=POINT_ROOM_Y_PX)),
                                                      color=alt.Color("series:N", scale=series, legend=series_legend)),
        p.mark_point(filled=True, size=70).encode(x=x, y="predicted_ms:Q", color=alt.Color("series:N", scale=series, legend=series_legend), tooltip=tip),
        p.mark_text(dy=-12, fontSize=10).encode(x=x, y="predicted_ms:Q", text="label:N"),
    ]
    if measured:
        layers.append(alt.Chart(alt.Data(values=measured)).mark_point(shape="diamond", filled=True, size=60).encode(
            x=x, y="measured_ms:Q", color=alt.Color("series:N", scale=series, legend=series_legend), tooltip=tip))
    note = ("predicted (step line, one point per revision) vs measured by executors (diamonds)" if measured else
            "no telemetry yet: revisions and their predicted latency only")
    return alt.layer(*layers).properties(width=width, height=220, title=_title(
        f"deployment {name}: {len(data)} revision{'s' if len(data) != 1 else ''}",
        [note, "rN: revision N (a new active plan or a rollback); predicted = the plan's latency from the evaluator"]))


# --------------------------------------------------------------------------- documents and output

Kind = Literal["plan", "schedule", "frontier"]


class FrontierPoint(BaseModel):
    latency_ms: float
    energy_mj: float
    transitions: int
    plan: str


class SweepRow(BaseModel):
    cap_mj: float
    feasible: bool
    latency_ms: float | None = None
    energy_mj: float | None = None
    transitions: int | None = None
    plan: str | None = None


class FrontierDocument(BaseModel):
    """What `planner frontier --json` writes (planner.frontier.FrontierReport), as far
    as the figure reads it: checked so a hand-edited file fails naming the field."""

    model_config = ConfigDict(extra="allow")
    platform: str
    model: str
    targets: str = "?"
    devices: list[str] = []
    max_transitions: int | None = None
    frontier: list[FrontierPoint] = Field(min_length=1)
    sweep: list[SweepRow] = []
    endpoints: dict[str, FrontierPoint] = {}
    sweep_range: dict[str, Any] = {}


def document_kind(doc: object) -> Kind:
    """Which document a JSON object is, by the fields only that kind has."""
    if isinstance(doc, dict):
        if "slices" in doc and "notation" in doc and "metrics" in doc:
            return "plan"
        if "entries" in doc and "objective_names" in doc:
            return "schedule"
        if "frontier" in doc and "sweep" in doc:
            return "frontier"
        if isinstance(doc.get("plan"), dict):  # the service's PlanResource / job result
            return document_kind(doc["plan"])
        if isinstance(doc.get("schedule"), dict):
            return document_kind(doc["schedule"])
    raise ValueError("not a plan, schedule or frontier document (expected `planner solve --json`, "
                     "`planner schedule --json` or `planner frontier --json` output)")


def unwrap(doc: dict) -> dict:
    """The document inside a service resource ({"plan": ...} / {"schedule": ...})."""
    for key in ("plan", "schedule"):
        if isinstance(doc.get(key), dict) and key not in ("slices",):
            inner = doc[key]
            if document_kind(inner) in ("plan", "schedule"):
                return inner
    return doc


def spec(chart: alt.TopLevelMixin) -> dict:
    """The Vega-Lite JSON a web page embeds (data inline: one self-contained spec)."""
    return chart.to_dict()


def render(chart: alt.TopLevelMixin, fmt: Literal["svg", "png"], scale: float = 2.0) -> bytes:
    """SVG text or PNG bytes, rendered in-process by vl-convert (no browser)."""
    import vl_convert as vlc

    s = spec(chart)
    if fmt == "svg":
        return vlc.vegalite_to_svg(s, vl_version=VL_VERSION).encode()
    if fmt == "png":
        return vlc.vegalite_to_png(s, vl_version=VL_VERSION, scale=scale)
    raise ValueError(f"unknown format {fmt!r}: svg or png")


def javascript_bundle() -> str:
    """vega + vega-lite + vega-embed as one script (global `vegaEmbed`), from the
    installed vl-convert package: the browser draws with the renderer's versions."""
    import vl_convert as vlc

    return vlc.javascript_bundle(vl_version=VL_VERSION)
