// The HTML report's own script: interactive thresholds, sorting and filtering.
//
// Inlined by dbpa/report/_html.py and allowed by its sha256 hash in the page's
// Content-Security-Policy (edit it freely: the hash is computed from this text). It reads
// numbers from data attributes (see the comment at the top of report.html.j2) and writes
// only text (textContent), classes and the hidden attribute: no text of the record is ever
// parsed as HTML. Without it the page reads as the static report it is.
"use strict";
(function () {
  // ------------------------------------------------------------ multiplicity corrections
  // dbpa.stats CORRECTIONS, operation for operation: adjusted p-values in the input's
  // order; a test is rejected where its adjusted p-value <= alpha.

  /** Indices of p in increasing order of p, ties in input order (a stable sort). */
  function ascending(p) {
    return p.map((_, i) => i).sort((a, b) => p[a] - p[b]);
  }

  function bonferroni(p) {
    return p.map((x) => Math.min(x * p.length, 1));
  }

  function holm(p) {
    const m = p.length;
    const adjusted = new Array(m);
    let running = -Infinity; // running maximum of p_(i) * (m - i), i = 0, 1, ...
    ascending(p).forEach((j, i) => {
      running = Math.max(running, p[j] * (m - i));
      adjusted[j] = Math.min(running, 1);
    });
    return adjusted;
  }

  /** Benjamini-Hochberg (factor 1) and Benjamini-Yekutieli (factor H_m), as
   * scipy.stats.false_discovery_control: p_(i) * (m / i) * factor, then the running
   * minimum from the largest p down, clipped to [0, 1]. */
  function stepUp(p, factor) {
    const m = p.length;
    if (m <= 1) return p.slice();
    const order = ascending(p);
    const adjusted = new Array(m);
    let running = Infinity;
    for (let i = m - 1; i >= 0; i--) {
      running = Math.min(running, p[order[i]] * (m / (i + 1)) * factor);
      adjusted[order[i]] = Math.min(Math.max(running, 0), 1);
    }
    return adjusted;
  }

  function harmonic(m) {
    let sum = 0;
    for (let i = m; i >= 1; i--) sum += 1 / i; // smallest terms first
    return sum;
  }

  const CORRECTIONS = Object.freeze({
    bonferroni: bonferroni,
    holm: holm,
    bh: (p) => stepUp(p, 1),
    by: (p) => stepUp(p, harmonic(p.length)),
  });

  // ------------------------------------------------------------ decisions

  /** One perturbation's decision from its corrected tests. ``equivalent`` is null when the
   * row carries no equivalence p-value (two labels), else whether the equivalence test
   * rejects (dbpa.stats decide_family: equivalent wins, then changed, else inconclusive). */
  function decide(changed, equivalent) {
    if (equivalent === null) return changed ? "changed" : "no change";
    if (equivalent) return "equivalent";
    return changed ? "changed" : "inconclusive";
  }

  /** Decisions on one family: rows are {p, pEquivalence}, p null for an untested row (it
   * counts as p = 1 in the correction, as in dbpa.analysis, and stays "not tested"). Both
   * kinds of p-value are corrected by the same method, each at alpha. */
  function decideFamily(rows, alpha, method) {
    const correct = CORRECTIONS[method];
    const change = correct(rows.map((r) => (r.p === null ? 1 : r.p)));
    const withEquivalence = rows.some((r) => r.pEquivalence !== null);
    const equivalence = withEquivalence
      ? correct(rows.map((r) => (r.pEquivalence === null ? 1 : r.pEquivalence)))
      : null;
    return rows.map((r, i) => {
      if (r.p === null) return { adjusted: null, decision: "not tested" };
      const equivalent = r.pEquivalence === null ? null : equivalence[i] <= alpha;
      return { adjusted: change[i], decision: decide(change[i] <= alpha, equivalent) };
    });
  }

  /** A p-value as the report writes it: 4 significant digits, never scientific. */
  function formatP(x) {
    if (x === null || Number.isNaN(x)) return "\u2013";
    const rounded = Number(x.toPrecision(4));
    if (rounded === 0) return "0";
    const digits = Math.max(0, 3 - Math.floor(Math.log10(Math.abs(rounded))));
    const text = rounded.toFixed(digits);
    return text.includes(".") ? text.replace(/\.?0+$/, "") : text;
  }

  // ------------------------------------------------------------ the page

  /** The perturbations of the page by family: every element carrying data-family and
   * data-perturbation shows one of them (a results or summary row, a matrix cell, an
   * alignment row). */
  function collectFamilies() {
    const families = new Map(); // family -> Map(perturbation -> entry)
    for (const el of document.querySelectorAll("[data-family][data-perturbation]")) {
      const name = el.dataset.family;
      if (!families.has(name)) families.set(name, new Map());
      const members = families.get(name);
      const id = el.dataset.perturbation;
      if (!members.has(id)) {
        members.set(id, { id: id, p: null, pEquivalence: null, label: "", views: [] });
      }
      const entry = members.get(id);
      if (el.hasAttribute("data-p")) entry.p = Number(el.dataset.p);
      if (el.hasAttribute("data-p-equivalence")) {
        entry.pEquivalence = Number(el.dataset.pEquivalence);
      }
      if (el.dataset.label) entry.label = el.dataset.label;
      entry.views.push(el);
    }
    return families;
  }

  /** Copies of what showDecision may change, to show the run's own decisions again. */
  function snapshot(el) {
    const parts = el.tagName === "TR" ? [el, ...el.querySelectorAll("td.adj, td.dec")] : [el];
    return parts.map((node) => ({
      node: node,
      className: node.className,
      sort: node.getAttribute("data-sort"),
      children: node.tagName === "TR" ? null : [...node.childNodes].map((c) => c.cloneNode(true)),
    }));
  }

  function restore(saved) {
    for (const part of saved) {
      part.node.className = part.className;
      if (part.sort !== null) part.node.setAttribute("data-sort", part.sort);
      if (part.children) part.node.replaceChildren(...part.children.map((c) => c.cloneNode(true)));
    }
  }

  function showDecision(el, adjusted, decision, label) {
    if (el.tagName !== "TR") { // a matrix cell
      el.classList.toggle("changed", decision === "changed");
      return;
    }
    const adj = el.querySelector("td.adj");
    if (adj) {
      adj.textContent = formatP(adjusted);
      adj.dataset.sort = String(adjusted);
    }
    const cell = el.querySelector("td.dec");
    const pill = cell && cell.querySelector(".pill");
    const controlChanged = label === "control" && decision === "changed";
    if (pill) {
      pill.className = "pill " + decision.replace(/ /g, "-");
      pill.textContent = decision;
      for (const flag of cell.querySelectorAll(".control-flag")) flag.remove();
      if (controlChanged) {
        const flag = document.createElement("span");
        flag.className = "reason red control-flag";
        flag.textContent = "control changed";
        cell.append(flag);
      }
    } else if (cell) {
      cell.textContent = decision;
    }
    el.classList.toggle("control-changed", controlChanged);
  }

  function decisionOf(tr) {
    const cell = tr.querySelector("td.dec");
    const pill = cell && cell.querySelector(".pill");
    return ((pill || cell) ? (pill || cell).textContent : "").trim();
  }

  // ------------------------------------------------------------ the summary

  /** The summary cards and the alert of changed controls. ``show(null)`` shows the run's
   * own again, exactly as recorded; ``show(tallies, setting)`` the page's: tallies maps a
   * family to {tested, changed, equivalent, inconclusive, labelled, controls, targets,
   * changedControls, changedTargets, controlsChanged: [{id, adjusted}]}. */
  function setupSummary(runSetting) {
    const cards = [...document.querySelectorAll("[data-card]")];
    const saved = cards.map((card) => ({
      card: card,
      className: card.className,
      children: [...card.childNodes].map((c) => c.cloneNode(true)),
    }));
    const runAlert = document.getElementById("controls-alert");
    let pageAlert = document.getElementById("controls-alert-page");
    const emptyAlert = pageAlert ? pageAlert.cloneNode(true) : null;
    const named = pageAlert ? Number(pageAlert.dataset.named) : 0;

    function verdict(t, setting) {
      let text = `At ${setting}: ${t.changed} of ${t.tested} tested perturbations changed ` +
        "the output distribution";
      if (t.withEquivalence) {
        text += `, ${t.equivalent} equivalent within the margin, ${t.inconclusive} inconclusive`;
      }
      if (t.controls || t.targets) {
        text += `; controls changed ${t.changedControls}/${t.controls}, ` +
          `targets changed ${t.changedTargets}/${t.targets}`;
      }
      return text + `. The run decided with ${runSetting}.`;
    }

    function alertOf(changed, setting) {
      pageAlert.replaceChildren();
      const n = changed.length;
      const strong = document.createElement("strong");
      strong.textContent = `${n} control perturbation${n > 1 ? "s" : ""} changed the output ` +
        `distribution at ${setting}`;
      pageAlert.append(strong, ` (this page's setting; the run decided with ${runSetting}), ` +
        `which ${n > 1 ? "they" : "it"} should not: `);
      changed.slice(0, named).forEach((c, i) => {
        const id = document.createElement("strong");
        id.textContent = c.id;
        pageAlert.append(id, ` (${c.family}, adj. p ${formatP(c.adjusted)})` +
          (i < Math.min(n, named) - 1 ? ", " : ""));
      });
      pageAlert.append((n > named ? ` and ${n - named} more (see the results)` : "") + ".");
    }

    return function show(tallies, setting) {
      if (tallies === null) {
        for (const part of saved) {
          part.card.className = part.className;
          part.card.replaceChildren(...part.children.map((c) => c.cloneNode(true)));
        }
        if (runAlert) runAlert.hidden = false;
        if (pageAlert) { // as it was, hidden and empty
          const fresh = emptyAlert.cloneNode(true);
          pageAlert.replaceWith(fresh);
          pageAlert = fresh;
        }
        return;
      }
      const changedControls = [];
      for (const card of cards) {
        const t = tallies.get(card.dataset.card);
        if (!t) continue;
        card.querySelector(".changed-count").textContent = String(t.changed);
        card.querySelector(".verdict").textContent = verdict(t, setting);
        card.classList.toggle("alarm", t.controlsChanged.length > 0);
        for (const c of t.controlsChanged) changedControls.push({ family: card.dataset.card, ...c });
      }
      if (runAlert) runAlert.hidden = true;
      if (pageAlert) {
        pageAlert.hidden = changedControls.length === 0;
        if (changedControls.length) alertOf(changedControls, setting);
      }
    };
  }

  function setupThresholds(panel, families, onChange) {
    const alphaInput = panel.querySelector("#alpha");
    const methodInput = panel.querySelector("#method");
    const tally = panel.querySelector("#tally");
    const runAlpha = Number(panel.dataset.alpha);
    const runMethod = panel.dataset.method;
    const runs = `The run's decisions: ${runMethod} at \u03b1 = ${runAlpha}.`;
    const showSummary = setupSummary(`${runMethod} at \u03b1 = ${runAlpha}`);
    const saved = [];
    for (const members of families.values()) {
      for (const entry of members.values()) {
        if (entry.p !== null) for (const el of entry.views) saved.push(snapshot(el));
      }
    }

    function apply() {
      const alpha = Number(alphaInput.value);
      const method = methodInput.value;
      const valid = alphaInput.value !== "" && alpha > 0 && alpha < 1;
      alphaInput.setCustomValidity(valid ? "" : "alpha must lie strictly between 0 and 1");
      if (!valid || !Object.hasOwn(CORRECTIONS, method)) return;
      if (alpha === runAlpha && method === runMethod) {
        saved.forEach(restore); // the run's own decisions, exactly as recorded
        showSummary(null);
        tally.textContent = runs;
      } else {
        const counts = [];
        const tallies = new Map();
        for (const [name, members] of families) {
          const entries = [...members.values()];
          const decided = decideFamily(entries, alpha, method);
          const t = {
            tested: 0, changed: 0, equivalent: 0, inconclusive: 0, controls: 0, targets: 0,
            changedControls: 0, changedTargets: 0, controlsChanged: [],
            withEquivalence: entries.some((e) => e.pEquivalence !== null),
          };
          entries.forEach((entry, i) => {
            if (entry.p === null) return;
            const { adjusted, decision } = decided[i];
            for (const el of entry.views) showDecision(el, adjusted, decision, entry.label);
            const changed = decision === "changed";
            t.tested += 1;
            t.changed += changed;
            t.equivalent += decision === "equivalent";
            t.inconclusive += decision === "inconclusive";
            t.controls += entry.label === "control";
            t.targets += entry.label === "target";
            t.changedTargets += changed && entry.label === "target";
            if (changed && entry.label === "control") {
              t.changedControls += 1;
              t.controlsChanged.push({ id: entry.id, adjusted: adjusted });
            }
          });
          tallies.set(name, t);
          const controls = t.changedControls;
          const among = controls ? ` (${controls} of them control${controls > 1 ? "s" : ""})` : "";
          counts.push(`${name}: ${t.changed} of ${t.tested} changed${among}`);
        }
        showSummary(tallies, `\u03b1 = ${alpha} with ${method}`);
        tally.textContent = `At \u03b1 = ${alpha} with ${method}: ${counts.join("; ")}.`;
      }
      onChange();
    }
    alphaInput.addEventListener("input", apply);
    methodInput.addEventListener("change", apply);
    tally.textContent = runs;
  }

  // ------------------------------------------------------------ sorting and filtering

  function sortKey(tr, column, numeric) {
    const cell = tr.cells[column];
    if (!cell) return numeric ? null : "";
    const text = cell.dataset.sort !== undefined ? cell.dataset.sort : cell.textContent.trim();
    if (!numeric) return text;
    const value = text === "" ? NaN : Number(text);
    return Number.isNaN(value) ? null : value;
  }

  /** Sort a table's body by one column; a second click reverses; missing numbers last. */
  function sortTable(table, th) {
    const column = th.cellIndex;
    const numeric = th.classList.contains("num");
    const direction = th.getAttribute("aria-sort") === "ascending" ? -1 : 1;
    for (const other of table.tHead.rows[0].cells) other.removeAttribute("aria-sort");
    th.setAttribute("aria-sort", direction > 0 ? "ascending" : "descending");
    const body = table.tBodies[0];
    const keyed = [...body.rows].map((tr, i) => ({ tr, i, key: sortKey(tr, column, numeric) }));
    keyed.sort((a, b) => {
      if (a.key === null || b.key === null) {
        if (a.key !== b.key) return a.key === null ? 1 : -1;
        return a.i - b.i;
      }
      const order = numeric
        ? a.key - b.key
        : a.key.localeCompare(b.key, undefined, { numeric: true });
      return order * direction || a.i - b.i;
    });
    body.append(...keyed.map((k) => k.tr));
  }

  function setupSorting(tables) {
    for (const table of tables) {
      if (!table.tHead) continue;
      for (const th of table.tHead.rows[0].cells) {
        th.tabIndex = 0;
        th.title = "Sort by " + th.textContent.trim();
        th.addEventListener("click", () => sortTable(table, th));
        th.addEventListener("keydown", (event) => {
          if (event.key === "Enter" || event.key === " ") {
            event.preventDefault();
            sortTable(table, th);
          }
        });
      }
    }
  }

  /** Show the rows whose id, label or description holds the text and whose decision
   * matches ("changed", "not changed" = any other, or one decision by name). */
  function setupFilter(panel, tables) {
    const textInput = panel.querySelector("#filter-text");
    const decisionInput = panel.querySelector("#filter-decision");
    const shown = panel.querySelector("#filter-shown");
    const rows = tables.flatMap((t) => [...t.tBodies[0].rows]);
    const searchable = new Map(rows.map((tr) => [tr, [
      tr.dataset.perturbation || "", tr.dataset.label || "",
      (tr.querySelector(".desc") || { textContent: "" }).textContent,
    ].join(" ").toLowerCase()]));

    function apply() {
      const text = textInput.value.trim().toLowerCase();
      const wanted = decisionInput.value;
      let count = 0;
      for (const tr of rows) {
        const decision = decisionOf(tr);
        const matches = searchable.get(tr).includes(text) && (wanted === "" ||
          (wanted === "not changed" ? decision !== "changed" : decision === wanted));
        tr.hidden = !matches;
        count += matches;
      }
      shown.textContent = text || wanted ? count + " of " + rows.length + " rows shown" : "";
    }
    textInput.addEventListener("input", apply);
    decisionInput.addEventListener("change", apply);
    return apply;
  }

  /** The prompt x perturbation heatmap of a set of prompts: show the prompts whose id or
   * text holds the text, and (ticked) only those moved under some perturbation. */
  function setupPromptFilter() {
    const panel = document.getElementById("prompt-controls");
    const table = document.querySelector("table.heatmap");
    if (!panel || !table) return;
    const textInput = panel.querySelector("#prompt-filter");
    const movedInput = panel.querySelector("#prompt-moved");
    const shown = panel.querySelector("#prompt-shown");
    const rows = [...table.tBodies[0].rows];
    const searchable = new Map(rows.map((tr) => [tr, tr.textContent.toLowerCase()]));
    function apply() {
      const text = textInput.value.trim().toLowerCase();
      let count = 0;
      for (const tr of rows) {
        const matches = searchable.get(tr).includes(text) &&
          (!movedInput.checked || tr.dataset.moved === "1");
        tr.hidden = !matches;
        count += matches;
      }
      shown.textContent = text || movedInput.checked
        ? count + " of " + rows.length + " prompts shown" : "";
    }
    textInput.addEventListener("input", apply);
    movedInput.addEventListener("change", apply);
    panel.hidden = false;
  }

  function init() {
    const panel = document.getElementById("controls");
    if (!panel) return;
    setupSorting([...document.querySelectorAll("table.heatmap")]);
    setupPromptFilter();
    const tables = [...document.querySelectorAll("table.results, table.summary")];
    const families = collectFamilies();
    if ([...families.values()].some((m) => [...m.values()].some((e) => e.pEquivalence !== null))) {
      const select = panel.querySelector("#filter-decision");
      for (const name of ["equivalent", "inconclusive"]) select.append(new Option(name, name));
    }
    setupSorting(tables);
    const refilter = setupFilter(panel, tables);
    setupThresholds(panel, families, refilter);
    document.documentElement.classList.add("interactive");
    panel.hidden = false;
  }

  // For the report's tests (and the curious reader's console).
  window.dbpaReport = Object.freeze({ CORRECTIONS, decide, decideFamily, formatP });
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
