/* depthwidth explore: the chart, plain SVG. Every value it places comes from the JSON API; this file
   only maps values to pixels (linear or log scales) and writes tick labels. */
"use strict";
(function () {
  const DW = (window.DW = window.DW || {});
  const SVG = "http://www.w3.org/2000/svg";
  const W = 760, H = 400, M = { left: 78, right: 18, top: 16, bottom: 48 };
  const GROUP_COLOURS = ["#3b6fb6", "#8a4fbf", "#1f9e9e", "#b5651d", "#5b7d2b", "#a23b72"];

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "text") node.textContent = v;
      else node.setAttribute(k, v === true ? "" : String(v));
    }
    for (const c of children) if (c !== null && c !== undefined) node.append(c);
    return node;
  }
  DW.el = el;

  function svg(tag, attrs, parent) {
    const node = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined) continue;
      if (k === "text") node.textContent = v;
      else node.setAttribute(k, String(v));
    }
    if (parent) parent.appendChild(node);
    return node;
  }

  /* a tick label: three significant digits with an SI prefix (the unit is in the axis title) */
  function tickText(v) {
    if (v === 0) return "0";
    const steps = [[1e15, "P"], [1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"], [1, ""], [1e-3, "m"], [1e-6, "u"]];
    for (const [size, prefix] of steps) {
      if (Math.abs(v) >= size * 0.9995) return String(Number((v / size).toPrecision(3))) + prefix;
    }
    return v.toExponential(1);
  }
  DW.tickText = tickText;

  function scale(values, lo, hi, { log, pad }) {
    let min = Math.min(...values), max = Math.max(...values);
    if (log) {
      min = Math.log10(min); max = Math.log10(max);
    }
    if (min === max) { min -= log ? 0.5 : Math.abs(min) * 0.1 || 1; max += log ? 0.5 : Math.abs(max) * 0.1 || 1; }
    const span = max - min;
    min -= span * pad; max += span * pad;
    const f = (v) => lo + ((log ? Math.log10(v) : v) - min) / (max - min) * (hi - lo);
    f.log = log; f.min = min; f.max = max;
    return f;
  }

  function ticks(s) {
    const out = [];
    if (s.log) {
      for (let e = Math.floor(s.min); e <= Math.ceil(s.max); e++) {
        for (const m of s.max - s.min > 3 ? [1] : [1, 2, 5]) {
          const v = m * Math.pow(10, e);
          const l = Math.log10(v);
          if (l >= s.min && l <= s.max) out.push(v);
        }
      }
      return out;
    }
    const raw = (s.max - s.min) / 6, mag = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((x) => x >= raw);
    for (let v = Math.ceil(s.min / step) * step; v <= s.max + step * 1e-9; v += step) out.push(Number(v.toPrecision(12)));
    return out;
  }

  function positive(values) { return values.length > 0 && values.every((v) => v > 0); }

  /* the chart of `state` (family, studies, y axis) into <svg id=chart>; `on` has hover(i), leave(), pin(i) */
  DW.drawChart = function (state, on) {
    const root = document.getElementById("chart");
    root.replaceChildren();
    root.setAttribute("viewBox", `0 0 ${W} ${H}`);
    const view = state.family ? state.family.view : null;
    const axis = (state.options.axes.find((a) => a.key === state.y) || state.options.axes[0]);
    const family = view && view.axes[axis.key] ? view.axes[axis.key] : null;
    const points = [];  // {x, y, kind, ...}
    if (family) {
      view.depths.forEach((d, i) => {
        if (family.values[i] !== null) points.push({ x: d, y: family.values[i], kind: "family", index: i });
      });
    }
    state.studies.forEach((study, si) => {
      if (!study) return;
      study.points.forEach((p) => {
        if (p.values[axis.key] !== undefined) points.push({ x: p.n_layers, y: p.values[axis.key], kind: "study", study: si, p });
      });
      (study.law_points || []).forEach((p) => {
        if (p.values[axis.key] !== undefined) points.push({ x: p.n_layers, y: p.values[axis.key], kind: "law", study: si, p });
      });
    });
    if (!points.length) {
      svg("text", { x: W / 2, y: H / 2, "text-anchor": "middle", class: "empty", text:
        state.family ? `nothing to draw on "${axis.label}" (${axis.family ? "" : "a study's axis; "}no values)` : "" }, root);
      return;
    }
    const ys = points.map((p) => p.y), xs = points.map((p) => p.x);
    for (const p of points) if (p.kind === "law") { ys.push(p.p.lo, p.p.hi); }
    for (const p of points) if (p.kind === "study" && axis.key === "loss" && p.p.loss_std) {
      ys.push(p.y - p.p.loss_std, p.y + p.p.loss_std);
    }
    const ylog = positive(ys) && Math.max(...ys) / Math.min(...ys) > 30;
    const xlog = positive(xs) && Math.max(...xs) / Math.min(...xs) >= 4;
    const sx = scale(xs, M.left, W - M.right, { log: xlog, pad: 0.06 });
    const sy = scale(ys, H - M.bottom, M.top, { log: ylog, pad: 0.08 });
    const grid = svg("g", { class: "grid" }, root);
    for (const t of ticks(sy)) {
      svg("line", { x1: M.left, x2: W - M.right, y1: sy(t), y2: sy(t) }, grid);
      svg("text", { x: M.left - 6, y: sy(t) + 4, "text-anchor": "end", text: tickText(t) }, grid);
    }
    const xt = xlog ? ticks(sx).filter((t) => t >= 1) : ticks(sx).filter((t) => Number.isInteger(t));
    for (const t of xt) {
      svg("line", { x1: sx(t), x2: sx(t), y1: M.top, y2: H - M.bottom }, grid);
      svg("text", { x: sx(t), y: H - M.bottom + 16, "text-anchor": "middle", text: tickText(t) }, grid);
    }
    svg("text", { x: (M.left + W - M.right) / 2, y: H - 10, "text-anchor": "middle", class: "axis-title",
      text: `depth (layers${xlog ? ", log scale" : ""})` }, root);
    svg("text", { x: 14, y: (M.top + H - M.bottom) / 2, "text-anchor": "middle", class: "axis-title",
      transform: `rotate(-90 14 ${(M.top + H - M.bottom) / 2})`, text: `${axis.unit}${ylog ? " (log)" : ""}` }, root);

    const fam = points.filter((p) => p.kind === "family");
    if (fam.length > 1) {
      svg("polyline", { class: "family-line", points: fam.map((p) => `${sx(p.x)},${sy(p.y)}`).join(" ") }, root);
    }
    for (const p of points.filter((q) => q.kind === "law")) {
      const g = svg("g", { class: "law-point" + (p.p.chosen ? " chosen" : "") + (p.p.in_basin ? " basin" : "") }, root);
      if (axis.key === "loss") svg("line", { x1: sx(p.x), x2: sx(p.x), y1: sy(p.p.lo), y2: sy(p.p.hi), class: "bar" }, g);
      const x = sx(p.x), y = sy(p.y);
      svg("path", { d: `M${x},${y - 6} L${x + 6},${y + 5} L${x - 6},${y + 5} Z` }, g);
      svg("title", { text: `${p.p.label} (the law at the budget): ${p.p.texts[axis.key]}` +
        (p.p.chosen ? " - prescribed" : "") + (p.p.in_basin ? " - in the basin" : "") }, g);
      g.addEventListener("mouseenter", () => on.note(`law at the budget: ${p.p.label}, ${axis.label}: ${p.p.texts[axis.key]}` +
        `${p.p.in_basin ? ", in the flat basin" : ""}${p.p.chosen ? ", prescribed" : ""}`));
    }
    for (const p of points.filter((q) => q.kind === "study")) {
      const colour = GROUP_COLOURS[(state.studies[p.study].groups || []).indexOf(p.p.group) % GROUP_COLOURS.length] || GROUP_COLOURS[0];
      const g = svg("g", { class: "study-point", "data-study": p.study, "data-key": p.p.key }, root);
      const x = sx(p.x), y = sy(p.y);
      if (axis.key === "loss") {
        if (p.p.loss_std) svg("line", { x1: x, x2: x, y1: sy(p.y - p.p.loss_std), y2: sy(p.y + p.p.loss_std), class: "bar", stroke: colour }, g);
        for (const s of p.p.seed_losses) svg("circle", { cx: x + 7, cy: sy(s), r: 1.8, class: "seed", fill: colour }, g);
      }
      svg("rect", { x: x - 5, y: y - 5, width: 10, height: 10, fill: colour }, g);
      svg("title", { text: `${state.studies[p.study].name} ${p.p.group} ${p.p.label}: ${p.p.texts[axis.key]}` }, g);
      g.addEventListener("mouseenter", () => on.note(`study ${state.studies[p.study].name}, ${p.p.group} ${p.p.label}` +
        ` (${p.p.n_layers} layers): ${axis.label}: ${p.p.texts[axis.key]}`));
    }
    for (const p of fam) {
      const verdict = view.verdicts[p.index], row = view.rows[p.index];
      const pinned = state.pins.includes(row.label);
      const g = svg("g", { class: "family-point" + (pinned ? " pinned" : "") + (state.sel === row.label ? " selected" : ""),
        "data-index": p.index, "data-label": row.label, "data-meets": verdict.meets ? "yes" : "no", tabindex: 0 }, root);
      if (row.pareto) svg("circle", { cx: sx(p.x), cy: sy(p.y), r: 10, class: "pareto" }, g);
      svg("circle", { cx: sx(p.x), cy: sy(p.y), r: 6.5, class: verdict.meets ? "meets" : "misses" }, g);
      svg("title", { text: `${row.label}: ${family.texts[p.index]} - ${verdict.text}` }, g);
      g.addEventListener("mouseenter", () => on.hover(p.index));
      g.addEventListener("mouseleave", () => on.leave());
      g.addEventListener("click", () => on.pin(p.index));
      g.addEventListener("keydown", (e) => { if (e.key === "Enter" || e.key === " ") on.pin(p.index); });
    }
  };

  /* the legend beside the axis picker */
  DW.drawLegend = function (state) {
    const box = document.getElementById("legend");
    box.replaceChildren();
    const item = (cls, text) => box.append(el("span", { class: "key " + cls }), el("span", { text }));
    item("meets", "meets the limits");
    item("misses", "misses a limit");
    item("pareto", "Pareto-best (decode, memory)");
    state.studies.forEach((s) => {
      if (!s) return;
      s.groups.forEach((g, k) => {
        const swatch = document.createElementNS(SVG, "svg");
        swatch.setAttribute("width", "11"); swatch.setAttribute("height", "11"); swatch.setAttribute("class", "swatch");
        svg("rect", { x: 0.5, y: 0.5, width: 10, height: 10, fill: GROUP_COLOURS[k % GROUP_COLOURS.length] }, swatch);
        box.append(swatch, el("span", { text: `${s.name} ${g}` }));
      });
    });
    if (state.studies.some((s) => s && s.law_points && s.law_points.length)) item("law", "the law's candidates at the budget");
  };
})();
