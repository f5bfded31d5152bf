/* depthwidth explore: the form (built from the fields the server describes), the address (every input is in
   its query string, so a view can be shared and reopened), and the requests to the JSON API. */
"use strict";
(function () {
  const DW = (window.DW = window.DW || {});
  const el = DW.el;
  const GROUPS = [["budget", "Budget"], ["family", "Family"], ["conventions", "Conventions"],
    ["workload", "Workload, parallelism, precision, hardware"], ["limits", "Limits"], ["study", "Study"]];
  const state = (DW.state = { options: null, values: {}, y: "decode_ms", pins: [], sel: null, hover: null,
    family: null, studies: [], studyErrors: [], seq: 0, controller: null, timer: null });

  async function getJSON(url, signal) {
    const r = await fetch(url, { signal, headers: { Accept: "application/json" } });
    const body = await r.json();
    if (!r.ok) throw new Error(body.error || `${r.status}`);
    return body;
  }

  function setStatus(kind, text) {
    const s = document.getElementById("status");
    s.dataset.state = kind;
    s.textContent = text;
  }

  /* ---- the address ---------------------------------------------------------------------------- */

  function readAddress() {
    const q = new URLSearchParams(location.search);
    const values = {};
    let any = false;
    for (const [k, v] of q) {
      if (k === "y") state.y = v;
      else if (k === "pins") state.pins = v.split(",").filter(Boolean).slice(0, 2);
      else if (k === "sel") state.sel = v;
      else { values[k] = v; any = true; }
    }
    state.values = any ? values : Object.assign({}, state.options.initial);
  }

  function fieldQuery() {
    const q = new URLSearchParams();
    for (const f of state.options.fields) {
      const v = state.values[f.name];
      if (v !== undefined && v !== "") q.set(f.name, v);
    }
    return q;
  }

  function writeAddress() {
    const q = fieldQuery();
    if (state.pins.length) q.set("pins", state.pins.join(","));
    if (state.y !== "decode_ms") q.set("y", state.y);
    if (state.sel) q.set("sel", state.sel);
    history.replaceState(null, "", "?" + q.toString());
    document.getElementById("share").href = location.href;
  }

  /* ---- the form ------------------------------------------------------------------------------- */

  function control(f) {
    const id = "f-" + f.name;
    const title = (f.help || "") + ` (${f.flag})`;
    if (f.kind === "bool") return el("input", { type: "checkbox", id, name: f.name, title });
    if (f.kind === "tied" || f.choices) {
      const choices = f.kind === "tied" ? ["tied", "untied"] : f.choices;
      const first = f.default !== null && f.default !== undefined ? `default (${f.default})` : "default";
      return el("select", { id, name: f.name, title }, el("option", { value: "", text: first }),
        ...choices.map((c) => el("option", { value: c, text: c })));
    }
    const list = f.name === "hardware" ? "hardware-list" : (f.name === "like" ? "preset-list" : null);
    const holder = f.default !== null && f.default !== undefined && f.default !== false ? String(f.default) : "";
    return el("input", { type: "text", id, name: f.name, title, list, placeholder: holder, spellcheck: "false",
      autocomplete: "off" });
  }

  function buildForm() {
    const form = document.getElementById("inputs");
    const o = state.options;
    form.append(el("datalist", { id: "hardware-list" }, ...o.hardware.map((h) => el("option", { value: h.name, text: h.label })),
      el("option", { value: "measured", text: "this machine's measured profile (depthwidth hw measure)" })));
    form.append(el("datalist", { id: "preset-list" }, ...o.presets.map((p) => el("option", { value: p }))));
    for (const [group, title] of GROUPS) {
      if (group === "study" && !o.studies.length) continue;
      const set = el("fieldset", { "data-group": group }, el("legend", { text: title }));
      if (group === "budget") {
        const pick = el("select", { id: "budget-kind", title: "a parameter budget (--params) or a training-compute budget (--flops)" },
          el("option", { value: "params", text: "parameters" }), el("option", { value: "flops", text: "training FLOPs" }));
        pick.addEventListener("change", () => { budgetKind(pick.value, true); schedule(); });
        set.append(el("div", { class: "field" }, el("label", { for: "budget-kind", text: "budget" }), pick));
      }
      for (const f of o.fields.filter((x) => x.group === group)) {
        const input = control(f);
        input.addEventListener(input.tagName === "INPUT" && input.type === "text" ? "input" : "change", schedule);
        set.append(el("div", { class: "field", "data-field": f.name },
          el("label", { for: input.id, text: f.label, title: f.flag }), input,
          el("span", { class: "err", id: "err-" + f.name, role: "alert" })));
      }
      form.append(set);
    }
  }

  function budgetKind(kind, clear) {
    const other = kind === "params" ? "flops" : "params";
    document.getElementById("budget-kind").value = kind;
    document.querySelector(`[data-field=${kind}]`).hidden = false;
    document.querySelector(`[data-field=${other}]`).hidden = true;
    for (const name of ["tokens_per_param", "tokens"]) document.querySelector(`[data-field=${name}]`).hidden = kind !== "flops";
    if (clear) {
      const input = document.getElementById("f-" + other);
      if (input.value && !document.getElementById("f-" + kind).value) document.getElementById("f-" + kind).value = input.value;
      input.value = "";
      if (kind === "params") for (const n of ["tokens_per_param", "tokens"]) document.getElementById("f-" + n).value = "";
    }
  }

  function fillForm() {
    for (const f of state.options.fields) {
      const input = document.getElementById("f-" + f.name);
      if (!input) continue;
      const v = state.values[f.name] || "";
      if (input.type === "checkbox") input.checked = ["1", "true", "on", "yes"].includes(v.toLowerCase());
      else input.value = v;
    }
    budgetKind(state.values.flops && !state.values.params ? "flops" : "params", false);
    const y = document.getElementById("y-axis");
    y.value = state.y;
    if (y.value !== state.y) { state.y = "decode_ms"; y.value = state.y; }
  }

  function readForm() {
    const values = {};
    for (const f of state.options.fields) {
      const input = document.getElementById("f-" + f.name);
      if (!input) continue;
      if (input.type === "checkbox") { if (input.checked) values[f.name] = "1"; }
      else if (input.value.trim() !== "") values[f.name] = input.value.trim();
    }
    state.values = values;
  }

  function showErrors(answer) {
    for (const node of document.querySelectorAll(".err")) node.textContent = "";
    for (const node of document.querySelectorAll(".field.invalid")) node.classList.remove("invalid");
    if (!answer || answer.ok) return;
    let placed = false;
    for (const [name, message] of Object.entries(answer.errors || {})) {
      const span = document.getElementById("err-" + name);
      if (!span) continue;
      span.textContent = message;
      span.parentElement.classList.add("invalid");
      span.parentElement.hidden = false;
      placed = true;
    }
    if (!placed) document.getElementById("form-error").textContent = answer.error;
  }

  /* ---- requests ------------------------------------------------------------------------------- */

  function schedule() {
    clearTimeout(state.timer);
    state.timer = setTimeout(update, 300);
  }

  async function update() {
    readForm();
    writeAddress();
    const seq = ++state.seq;
    if (state.controller) state.controller.abort();
    const controller = (state.controller = new AbortController());
    const q = fieldQuery();
    if (state.pins.length) q.set("pins", state.pins.join(","));
    setStatus("computing", "computing...");
    let answer;
    try {
      answer = await getJSON("/page/family?" + q.toString(), controller.signal);
    } catch (e) {
      if (controller.signal.aborted) return;
      setStatus("error", "the server did not answer: " + e.message);
      return;
    }
    if (seq !== state.seq) return;
    showErrors(answer);
    if (!answer.ok) { setStatus("invalid", answer.error); return; }
    state.family = answer.result;
    render();
    const status = document.getElementById("status");
    if (state.options.studies.length) {
      setStatus("studies", "computing the studies' panels...");
      await loadStudies(seq, controller.signal);
      if (seq !== state.seq) return;
    }
    setStatus("ready", "ready");
    status.dataset.query = fieldQuery().toString();
  }

  async function loadStudies(seq, signal) {
    const q = fieldQuery();
    await Promise.all(state.options.studies.map(async (s, i) => {
      const sq = new URLSearchParams(q);
      sq.set("study", String(i));
      try {
        const answer = await getJSON("/page/study?" + sq.toString(), signal);
        if (seq !== state.seq || (answer.ok && answer.result.superseded)) return;
        if (answer.ok) { state.studies[i] = answer.result; state.studyErrors[i] = null; }
        else { state.studies[i] = null; state.studyErrors[i] = answer.error; }
      } catch (e) {
        if (signal.aborted) return;
        state.studies[i] = null;
        state.studyErrors[i] = "the server did not answer: " + e.message;
      }
      if (seq === state.seq) { DW.renderStudies(state); draw(); }
    }));
  }

  /* ---- drawing -------------------------------------------------------------------------------- */

  const on = {
    hover(i) { state.hover = i; DW.renderDetail(state, i); },
    leave() { state.hover = null; DW.renderDetail(state, selectedIndex()); },
    pin(i) {
      const label = state.family.view.rows[i].label;
      state.sel = label;
      const pins = state.pins.filter((p) => p !== label);
      DW.setPins(pins.length === state.pins.length ? [...pins, label].slice(-2) : pins);
    },
    note(text) { document.getElementById("hover-note").textContent = text; },
  };

  function selectedIndex() {
    if (!state.family || !state.sel) return null;
    const i = state.family.view.rows.findIndex((r) => r.label === state.sel);
    return i < 0 ? null : i;
  }

  DW.setPins = function (pins) {
    state.pins = pins;
    if (!pins.length) state.sel = null;
    update();
  };

  function draw() {
    DW.drawChart(state, on);
    DW.drawLegend(state);
  }

  function render() {
    document.getElementById("command").textContent = state.family.commands.plan;
    DW.renderTable(state, on);
    DW.renderDetail(state, state.hover !== null ? state.hover : selectedIndex());
    DW.renderPair(state);
    draw();
  }

  async function start() {
    try {
      state.options = await getJSON("/api/options");
    } catch (e) {
      setStatus("error", "the server did not answer: " + e.message);
      return;
    }
    document.getElementById("version").textContent = "depthwidth " + state.options.version;
    const y = document.getElementById("y-axis");
    y.replaceChildren(...state.options.axes.map((a) => el("option", { value: a.key, text: a.label })));
    y.addEventListener("change", () => { state.y = y.value; writeAddress(); draw(); });
    buildForm();
    readAddress();
    fillForm();
    DW.renderStudies(state);
    update();
  }

  document.addEventListener("DOMContentLoaded", start);
})();
