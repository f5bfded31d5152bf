/* depthwidth explore: the family table, one member's detail (its `calc --json`), two members pinned side by
   side and each study's panel. Every text is written by the server (depthwidth's own formatter). */
"use strict";
(function () {
  const DW = (window.DW = window.DW || {});
  const el = DW.el;

  DW.renderTable = function (state, on) {
    const table = document.getElementById("family");
    const view = state.family.view;
    const head = el("tr", {}, ...view.columns.map((c) => el("th", { "data-key": c.key, text: c.label })));
    table.tHead.replaceChildren(head);
    const body = view.rows.map((row, i) => {
      const cells = row.cells.map((c, j) => el("td", {
        "data-key": c.key, "data-value": c.value === null ? "" : (typeof c.value === "boolean" ? String(c.value) : c.value),
        class: j === 0 ? "label" : (c.key === "limits" ? (c.value ? "meets" : "misses") : "num"),
        text: j === 0 && row.pareto ? c.text + " *" : c.text,
      }));
      const cls = [view.verdicts[i].meets ? "meets" : "misses"];
      if (state.pins.includes(row.label)) cls.push("pinned");
      if (state.sel === row.label) cls.push("selected");
      const tr = el("tr", { "data-index": i, "data-label": row.label, class: cls.join(" "), tabindex: 0 }, ...cells);
      tr.addEventListener("mouseenter", () => on.hover(i));
      tr.addEventListener("mouseleave", () => on.leave());
      tr.addEventListener("click", () => on.pin(i));
      return tr;
    });
    table.tBodies[0].replaceChildren(...body);
    const fam = state.family.plan.family;
    const notes = [...fam.notes, ...fam.dropped.map((d) => "dropped: " + d.reason)];
    document.getElementById("family-note").replaceChildren(
      el("span", { text: view.title + ". * Pareto-best on (decode ms, training memory). " }),
      ...notes.map((n) => el("span", { class: "note", text: n + ". " })));
  };

  DW.renderDetail = function (state, index) {
    const box = document.getElementById("detail-body");
    if (index === null || index === undefined || !state.family || !state.family.details[index]) {
      box.replaceChildren(el("p", { class: "hint", text: "Hover a point or a row for one shape's detail; click to pin it." }));
      box.dataset.label = "";
      return;
    }
    const d = state.family.details[index];
    const label = state.family.view.rows[index].label;
    const member = state.family.plan.members[index];
    const verdict = state.family.view.verdicts[index];
    const parts = [el("h3", { text: label }),
      el("p", { class: verdict.meets ? "meets" : "misses", text: "limits: " + verdict.text }),
      el("p", {}, el("code", { class: "command", id: "detail-command", text: d.command }))];
    for (const t of d.rows) {
      parts.push(el("table", { class: "kv" }, el("caption", { text: t.title }),
        el("tbody", {}, ...t.rows.map((r) => el("tr", {}, ...r.map((c, j) => el(j === 0 ? "th" : "td", { text: c })))))));
    }
    if (member.lint.length) {
      parts.push(el("ul", { class: "lint" }, ...member.lint.map((f) => el("li", { text: `${f.code} ${f.message}; fix: ${f.fix}` }))));
    }
    parts.push(el("details", {}, el("summary", { text: "calc --json" }),
      el("pre", { id: "detail-json", text: JSON.stringify(d.calc, null, 2) })));
    box.replaceChildren(...parts);
    box.dataset.label = label;
  };

  DW.renderPair = function (state) {
    const box = document.getElementById("pins-body");
    const p = state.family && state.family.pair;
    if (!p) {
      const n = state.pins.length;
      box.replaceChildren(el("p", { class: "hint", text: n === 1 ? `${state.pins[0]} pinned: click another shape to compare.`
        : "Click two points or rows to pin them side by side." }));
      box.dataset.pair = "";
      return;
    }
    const head = el("tr", {}, el("th", { text: "" }), el("th", { text: p.a }), el("th", { text: p.b }), el("th", { text: "2nd / 1st", title: `${p.b} / ${p.a}` }));
    const rows = p.rows.map((r) => el("tr", {}, el("th", { text: r.label }), el("td", { text: r.a }), el("td", { text: r.b }),
      el("td", { class: "ratio", text: r.ratio_text })));
    const clear = el("button", { type: "button", id: "unpin", text: "unpin both" });
    clear.addEventListener("click", () => DW.setPins([]));
    box.replaceChildren(el("table", { class: "pair" }, el("thead", {}, head), el("tbody", {}, ...rows)), clear);
    box.dataset.pair = `${p.a},${p.b}`;
  };

  function para(text, cls) { return el("p", { class: cls || "", text }); }

  DW.renderStudies = function (state) {
    const box = document.getElementById("studies");
    const parts = [];
    state.options.studies.forEach((info, i) => {
      const s = state.studies[i];
      const sec = el("section", { class: "study", id: `study-${i}`, "data-state": s ? "ready" : "loading" },
        el("h2", { text: `Study: ${info.name}` }), para(`${info.folder}: ${info.shapes} measured shapes` +
          (s && s.horizon_rows ? ` (and ${s.horizon_rows} rows of its horizon groups, the same shapes at fewer tokens, not drawn)` : ""), "hint"));
      if (!s) { sec.append(para(state.studyErrors[i] || "loading the study...", state.studyErrors[i] ? "err" : "hint")); parts.push(sec); return; }
      sec.append(el("h3", { text: "Recommendation under the page's limits" }));
      if (s.recommendation) {
        sec.append(para(s.recommendation.verdict, "verdict"));
        if (s.recommendation.trade) sec.append(para("Trade: " + s.recommendation.trade + "."));
        sec.append(para("Noise: " + s.recommendation.noise.description, "hint"));
      } else sec.append(para(s.recommendation_error, "hint"));
      sec.append(el("p", {}, el("code", { class: "command", text: s.commands.recommend })));
      sec.append(el("h3", { text: "Prescription at the page's budget" }));
      if (s.prescription && s.prescription.prescription) {
        sec.append(para(s.prescription.prescription.verdict, "verdict"));
        for (const w of s.prescription.prescription.warnings) sec.append(para("warning: " + w, "hint"));
      } else sec.append(para(s.prescription_note || "no prescription", "hint"));
      if (s.commands.prescribe) sec.append(el("p", {}, el("code", { class: "command", text: s.commands.prescribe })));
      const cols = [["group", (p) => p.group], ["shape", (p) => p.label], ["layers", (p) => String(p.n_layers)],
        ["loss", (p) => p.texts.loss || "-"], ["decode ms", (p) => p.texts.decode_ms || "-"],
        ["prefill ms", (p) => p.texts.prefill_ms || "-"], ["train tokens/s", (p) => p.texts.train_tokens_per_s || "-"],
        ["generation tokens/s", (p) => p.texts.tokens_per_s || "-"], ["peak memory", (p) => p.texts.memory || "-"]];
      sec.append(el("table", { class: "study-points" },
        el("thead", {}, el("tr", {}, ...cols.map(([h]) => el("th", { text: h })))),
        el("tbody", {}, ...s.points.map((p) => el("tr", { "data-key": p.key }, ...cols.map(([, f]) => el("td", { text: f(p) })))))));
      parts.push(sec);
    });
    box.replaceChildren(...parts);
  };
})();
