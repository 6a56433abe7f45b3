// ragd's window: a small client of the daemon's /api. No framework, no build step.
//
// Everything the server sends (file names, subjects, snippets, error messages) is untrusted
// text: it reaches the page only through textContent / text nodes, never innerHTML. The
// Content-Security-Policy forbids inline scripts and styles, so all behaviour is wired here.

const $ = (sel, root = document) => root.querySelector(sel);
const VIEWS = ["search", "status", "skipped", "sources"];
const TOP_K = 20;
const MAX_SKIP_ROWS = 500;  // a table longer than this is slow and unreadable: filter instead

/** Build an element: el("a", {class: "x", href: "…", onclick: fn}, "text", child, …).
 *  String children become text nodes, so untrusted text stays text. */
function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") node.className = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children) if (c !== null && c !== undefined && c !== false) node.append(c);
  return node;
}

const fmt = (n) => Number(n || 0).toLocaleString();
const plural = (n, one, many = one + "s") => `${fmt(n)} ${n === 1 ? one : many}`;

/** A time from the server (unix seconds or a string) for people. */
function when(t) {
  if (t === null || t === undefined || t === "") return "never";
  if (typeof t === "number") return new Date(t > 1e12 ? t : t * 1000).toLocaleString();
  return String(t);
}

/* ---------- the API ---------- */

class ApiError extends Error {
  constructor(message, hint = "", code = "", status = 0) {
    super(message);
    Object.assign(this, { hint, code, status });
  }
}

let sessionEnded = false;  // after a 401 nothing here can help: stop polling

/** POST /api/<method> with JSON params; resolves to `result`, rejects with an ApiError. */
async function api(method, params = {}) {
  let resp;
  try {
    resp = await fetch(`/api/${method}`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(params),
      credentials: "same-origin",
    });
  } catch {
    throw new ApiError("Cannot reach ragd.",
      "Is the daemon running? Start it with `ragd start`, then open ragd again.", "offline");
  }
  if (resp.status === 401) {
    sessionEnded = true;
    throw new ApiError("This window's session has ended.",
      "Open ragd again from the tray or with `ragd open`.", "session", 401);
  }
  let body = null;
  try { body = await resp.json(); } catch { /* not JSON: reported below */ }
  if (!resp.ok || !body || !("result" in body)) {
    const e = (body && body.error) || {};
    throw new ApiError(e.message || `ragd answered ${resp.status} ${resp.statusText}`,
      e.hint || "", e.code || "http", resp.status);
  }
  return body.result;
}

/* ---------- messages ---------- */

let alertSource = null;  // which part of the page raised the error shown

/** Show an error (message and hint) in the alert area; `source` lets that part clear it. */
function showError(err, source) {
  const msg = err.message || String(err), hint = err.hint || "";
  const box = $("#alert");
  alertSource = source;
  if (!box.hidden && $("#alert-message").textContent === msg
      && $("#alert-hint").textContent === hint) return;  // no re-announcing every poll
  $("#alert-message").textContent = msg;
  $("#alert-hint").textContent = hint;
  $("#alert-hint").hidden = !hint;
  box.hidden = false;
}

function clearError(source) {
  if (source === undefined || source === alertSource) {
    $("#alert").hidden = true;
    alertSource = null;
  }
}

let noticeTimer = 0;
/** A short polite message ("Copied …", "Queued"), gone after a few seconds. */
function notify(text) {
  $("#notice").textContent = text;
  clearTimeout(noticeTimer);
  noticeTimer = setTimeout(() => { $("#notice").textContent = ""; }, 4000);
}

/* ---------- router ---------- */

let view = null;

/** "#/skipped?collection=notes" → {name: "skipped", params: URLSearchParams}. */
function parseHash() {
  const h = location.hash.replace(/^#\/?/, "");
  const i = h.indexOf("?");
  const name = i < 0 ? h : h.slice(0, i);
  return {
    name: VIEWS.includes(name) ? name : "search",
    params: new URLSearchParams(i < 0 ? "" : h.slice(i + 1)),
  };
}

function route(byUser) {
  if (location.hash && !location.hash.startsWith("#/")) return;  // "#main": the skip link
  const { name, params } = parseHash();
  const changed = name !== view;
  view = name;
  for (const v of VIEWS) {
    $(`#${v}-view`).hidden = v !== name;
    const link = $(`#nav-${v}`);
    if (v === name) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  document.title = name === "search" ? "ragd" : `ragd: ${name[0].toUpperCase()}${name.slice(1)}`;
  if (name === "search") {
    const q = params.get("q");
    if (q !== null && q !== $("#q").value) { $("#q").value = q; runSearch(); }
    if (changed) focusSearch(false);
  } else {
    if (changed && byUser) $(`#${name}-h`).focus();
    if (name === "status") poll();
    if (name === "skipped") loadSkipped(params);
    if (name === "sources") loadSources();
  }
}

/** Show a view (Alt+1..4); when it is already shown, move the focus to it again. */
function go(name) {
  if (view !== name) { location.hash = `#/${name}`; return; }
  if (name === "search") focusSearch(false);
  else $(`#${name}-h`).focus();
}

/* ---------- search ---------- */

let searchSeq = 0;       // answers to older requests are dropped
let debounceTimer = 0;
let results = [];        // the results shown, in order
let selected = -1;       // index of the keyboard-selected result
let explainCache = null; // {key, promise}: one explain:true search per query

function focusSearch(selectAll) {
  const q = $("#q");
  q.focus();
  if (selectAll) q.select();
  else q.setSelectionRange(q.value.length, q.value.length);
}

/** The search's parameters from the box and the filters. */
function searchParams() {
  const val = (id) => $(id).value.trim();
  const p = { query: val("#q"), top_k: TOP_K };
  const optional = { collection: "#f-collection", source_type: "#f-type", date_from: "#f-from",
    date_to: "#f-to", sender: "#f-sender", author: "#f-author" };
  for (const [key, id] of Object.entries(optional)) if (val(id)) p[key] = val(id);
  const tags = val("#f-tag").split(/[\s,]+/).map((t) => t.replace(/^#/, "")).filter(Boolean);
  if (tags.length) p.tags = tags;
  return p;
}

function scheduleSearch() {
  clearTimeout(debounceTimer);
  debounceTimer = setTimeout(runSearch, 150);
}

async function runSearch() {
  clearTimeout(debounceTimer);
  const params = searchParams();
  const active = Object.keys(params).length - 2;  // minus query and top_k
  $("#filter-count").textContent = active > 0 ? `(${active} on)` : "";
  if (view === "search") {  // keep the query in the address, without a history entry
    history.replaceState(null, "", params.query
      ? `#/search?q=${encodeURIComponent(params.query)}` : "#/search");
  }
  const seq = ++searchSeq;
  if (!params.query) { renderResults(null, params); return; }
  $("#results").setAttribute("aria-busy", "true");
  try {
    const res = await api("search", params);
    if (seq !== searchSeq) return;
    clearError("search");
    renderResults(res, params);
  } catch (e) {
    if (seq === searchSeq) showError(e, "search");
  } finally {
    if (seq === searchSeq) $("#results").removeAttribute("aria-busy");
  }
}

/** The query's words, longest first, for highlighting. */
function queryTerms(q) {
  const words = (q.match(/[\p{L}\p{N}_]+/gu) || [])
    .filter((w) => w.length > 1 || /[^\x00-\x7f]/.test(w));
  return [...new Set(words.map((w) => w.toLowerCase()))].sort((a, b) => b.length - a.length);
}

/** Plain text with the terms wrapped in <mark>, as DOM nodes. */
function highlight(text, terms) {
  const frag = document.createDocumentFragment();
  if (!terms.length) { frag.append(text); return frag; }
  const escaped = terms.map((t) => t.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
  const parts = text.split(new RegExp(`(${escaped.join("|")})`, "giu"));
  parts.forEach((part, i) => { if (part) frag.append(i % 2 ? el("mark", {}, part) : part); });
  return frag;
}

/** Only schemes that open something harmless: the vault app, web pages, mail. */
function safeHref(open) {
  if (!open || !open.href || !["obsidian", "url"].includes(open.kind)) return null;
  try {
    const u = new URL(open.href);
    return ["obsidian:", "http:", "https:", "mailto:"].includes(u.protocol) ? u.href : null;
  } catch { return null; }
}

function renderResults(res, params) {
  const list = $("#results");
  results = res ? res.results || [] : [];
  selected = -1;
  explainCache = null;
  const terms = queryTerms(params.query);
  list.replaceChildren(...results.map((r, i) => renderResult(r, i, terms, params)));
  $("#result-count").textContent = !res ? ""
    : results.length ? plural(results.length, "result") : "No results.";
  const pending = $("#pending"), ix = res && res.indexing;
  pending.hidden = !(ix && ix.active);
  pending.textContent = pending.hidden ? ""
    : `Indexing — ${plural(ix.remaining || 0, "item")} still to come; results may be incomplete.`;
}

function renderResult(r, i, terms, params) {
  const md = r.metadata || {};
  const title = r.title || r.source_path || "(untitled)";
  const href = safeHref(r.open);
  let titleNode;
  if (href) {
    titleNode = el("a", { class: "title", href, rel: "noopener noreferrer",
      target: r.open.kind === "url" ? "_blank" : null }, title);
  } else if (r.open && r.open.kind === "file") {
    titleNode = el("button", { type: "button", class: "title linklike",
      onclick: () => openFile(r) }, title);
  } else {
    titleNode = el("span", { class: "title" }, title);
  }

  const meta = [r.collection, r.source_type, md.date, md.sender && `from ${md.sender}`,
    md.author && `by ${md.author}`].filter(Boolean);
  const heading = (md.heading_path || []).join(" › ");
  const tags = (md.tags || []).map((t) => `#${t}`).join(" ");

  const actions = el("div", { class: "actions" });
  if (r.wikilink) {
    actions.append(el("button", { type: "button", class: "small copy",
      "aria-label": `Copy wikilink ${r.wikilink}`, onclick: () => copyWikilink(r) },
    "Copy wikilink"));
  }
  const why = el("div", { class: "why-body" });
  const details = el("details", { class: "why" }, el("summary", {}, "Why this result"), why);
  details.addEventListener("toggle", () => {
    if (details.open && !why.dataset.loaded) explain(r, params, why);
  });
  actions.append(details);

  const cell = el("div", { role: "gridcell", class: "cell" },
    el("h3", { class: "result-h" }, titleNode),
    el("p", { class: "snippet" }, highlight(md.snippet || "", terms)),
    el("p", { class: "meta" }, meta.join(" · "),
      heading && el("span", { class: "heading" }, heading),
      tags && el("span", { class: "tags" }, tags)),
    r.source_path && r.source_path !== title && el("p", { class: "path" }, r.source_path),
    actions);
  const li = el("li", { class: "result", role: "row", id: `result-${i}`, "data-index": i,
    tabindex: i === 0 ? "0" : "-1", "aria-selected": "false" }, cell);
  li.addEventListener("click", () => select(i, false));
  return li;
}

/** Ask the same search again with explain:true (once per query) and show this result's ranks. */
async function explain(r, params, box) {
  box.textContent = "Asking ragd…";
  const key = JSON.stringify(params);
  if (!explainCache || explainCache.key !== key) {
    explainCache = { key, promise: api("search", { ...params, explain: true }) };
  }
  try {
    const res = await explainCache.promise;
    const same = (x) => x.source_path === r.source_path && x.title === r.title;
    const hit = res.results.find(same) || res.results.find((x) => x.source_path === r.source_path);
    const ex = hit && hit.metadata && hit.metadata.explain;
    box.replaceChildren();
    if (!ex) { box.textContent = "No explanation came back (the index may have changed)."; return; }
    const ranks = Object.entries(ex.ranks || {});
    const num = (x) => (typeof x === "number" ? x.toFixed(4) : "–");
    box.append(el("p", {}, `Score ${num(hit.score)}; fused ${num(ex.fused)}.`),
      el("ul", { class: "plain" }, ...ranks.map(([leg, rank]) => el("li", {}, `${leg}: rank ${rank}`))));
    if (!ranks.length) box.append(el("p", {}, "Found by no single search leg."));
    box.dataset.loaded = "1";
  } catch (e) {
    explainCache = null;
    box.textContent = "";
    showError(e, "search");
  }
}

/** Select the i-th result (aria-selected, roving tabindex) and focus it. */
function select(i, focus = true) {
  const rows = [...$("#results").children];
  if (!rows.length) return;
  selected = Math.max(0, Math.min(i, rows.length - 1));
  rows.forEach((row, j) => {
    row.setAttribute("aria-selected", String(j === selected));
    row.tabIndex = j === selected ? 0 : -1;
  });
  if (focus) rows[selected].focus();
}

function openResult(i) {
  const r = results[i], row = $(`#result-${i}`);
  const link = row && row.querySelector("a.title");
  if (link) link.click();
  else if (r.open && r.open.kind === "file") openFile(r);
  else notify("This result cannot be opened from here.");
}

async function openFile(r) {
  try {
    await api("open", { source_path: r.source_path });
    notify(`Opened ${r.title || r.source_path}.`);
  } catch (e) { showError(e, "open"); }
}

async function copyWikilink(r) {
  if (!r.wikilink) { notify("This result has no wikilink."); return; }
  try {  // loopback pages are a secure context, so the clipboard API is there
    await navigator.clipboard.writeText(r.wikilink);
    notify(`Copied ${r.wikilink}`);
  } catch { notify(`Could not copy; the wikilink is ${r.wikilink}`); }
}

function onResultsKey(e) {
  const row = e.target.closest && e.target.closest("li.result");
  if (!row) return;
  const i = Number(row.dataset.index), onRow = e.target === row;
  const plain = !e.ctrlKey && !e.metaKey && !e.altKey;
  if (e.key === "ArrowDown") { e.preventDefault(); select(i + 1); }
  else if (e.key === "ArrowUp") { e.preventDefault(); if (i === 0) focusSearch(false); else select(i - 1); }
  else if (e.key === "Home" && onRow) { e.preventDefault(); select(0); }
  else if (e.key === "End" && onRow) { e.preventDefault(); select(results.length - 1); }
  else if (e.key === "Escape") { e.preventDefault(); focusSearch(false); }
  else if (e.key === "Enter" && onRow) { e.preventDefault(); openResult(i); }
  else if (e.key === "c" && onRow && plain) { e.preventDefault(); copyWikilink(results[i]); }
  else if (onRow && plain && e.key.length === 1 && e.key !== "/" && e.key !== " ") {
    focusSearch(false);  // typing goes on in the box: the key lands there
  }
}

/* ---------- collections (for the selects) ---------- */

/** Refill a select after its first option ("any"/"all"), keeping the chosen value. */
function fillSelect(select, values, keep = select.value) {
  const vals = [...new Set(values)];
  if (keep && !vals.includes(keep)) vals.push(keep);
  select.replaceChildren(select.options[0], ...vals.map((v) => el("option", { value: v }, v)));
  select.value = keep;
}

async function loadCollections() {
  try {
    const cols = await api("list_collections");
    const names = cols.map((c) => c.name);
    fillSelect($("#f-collection"), names);
    fillSelect($("#skip-collection"), names);
  } catch (e) { showError(e, "collections"); }
}

/* ---------- status: badge (every 2 s) and the view (every 1 s) ---------- */

let pollTimer = 0, polling = false;

async function poll() {
  clearTimeout(pollTimer);
  if (document.hidden || sessionEnded || polling) return;
  polling = true;
  let delay = view === "status" ? 1000 : 2000;
  try {
    const st = await api("status");
    clearError("status");
    renderBadge(st);
    if (view === "status") renderStatus(st);
  } catch (e) {
    renderBadge(null, e);
    showError(e, "status");
    delay = 5000;
  } finally {
    polling = false;
    if (!sessionEnded) pollTimer = setTimeout(poll, delay);
  }
}

function renderBadge(st, err) {
  const badge = $("#state-badge");
  const left = st && st.indexing ? st.indexing.remaining || 0 : 0;
  let text, kind;
  if (!st) {
    text = err.status === 401 ? "session ended" : err.code === "offline" ? "not running" : "error";
    kind = "error";
  }
  else if (st.paused) { [text, kind] = [left ? `paused, ${fmt(left)} left` : "paused", "paused"]; }
  else if (st.state === "indexing" || (st.indexing && st.indexing.active)) {
    [text, kind] = [`indexing ${fmt(left)} left`, "indexing"];
  } else { [text, kind] = [st.state || "idle", st.state === "idle" ? "idle" : "other"]; }
  badge.textContent = text;
  badge.className = `badge badge-${kind}`;
}

function statusLine(st) {
  const state = st.state || "unknown";
  const left = st.indexing ? st.indexing.remaining || 0 : 0;
  const parts = [];
  if (st.paused) parts.push(`Paused${st.paused_for ? ` (${st.paused_for})` : ""}: ${plural(left, "item")} waiting.`);
  else if (state === "idle") parts.push("Idle: everything is indexed.");
  else if (left) parts.push(`${state[0].toUpperCase()}${state.slice(1)}: ${plural(left, "item")} to go.`);
  else parts.push(`State: ${state}.`);
  const em = st.embedding;
  if (em && em.chunks && em.embedded < em.chunks) {
    parts.push(`${fmt(em.embedded)} of ${plural(em.chunks, "chunk")} embedded${st.embedding_paused ? " (paused)" : ""}.`);
  }
  if (st.version) parts.push(`ragd ${st.version}`);
  return parts.join(" ");
}

const rowsByName = new Map();  // collection name → its row's elements, updated in place

/** A collection's row; updated in place each second so focus and reading are not lost. */
function makeCollectionRow(name) {
  const r = {
    type: el("span", { class: "tag col-type" }),
    counts: el("span", { class: "col-counts" }),
    skipped: el("a", { class: "col-skipped", href: `#/skipped?collection=${encodeURIComponent(name)}` }),
    info: el("p", { class: "col-info" }),
    progress: el("progress", { class: "progress", "aria-label": `Progress of ${name}` }),
    label: el("span", { class: "progress-label" }),
  };
  r.box = el("div", { class: "progress-box" }, r.progress, r.label);
  r.li = el("li", { class: "collection-row", "data-name": name },
    el("h4", { class: "col-name" }, name, " ", r.type),
    el("p", {}, r.counts, " · ", r.skipped), r.info, r.box,
    el("button", { type: "button", class: "small reindex-one", "aria-label": `Reindex ${name}`,
      onclick: () => reindex(name) }, "Reindex"));
  return r;
}

function updateCollectionRow(r, c, st) {
  r.type.textContent = c.type || "";
  r.counts.textContent = `${plural(c.source_count || 0, "source")} · ${plural(c.chunk_count || 0, "chunk")}`;
  r.skipped.textContent = `${fmt(c.skipped_count)} skipped`;
  r.info.textContent = [c.stopped && `Stopped: ${c.stopped}.`,
    `Last indexed: ${when(c.last_indexed)}.`].filter(Boolean).join(" ");
  const cur = st.current;
  let value = null, max = null, label = "";
  if (cur && cur.collection === c.name) {
    [value, max] = cur.total ? [cur.done || 0, cur.total] : [undefined, 1];
    label = `${cur.phase || "indexing"}${cur.total ? `: ${fmt(cur.done)} of ${fmt(cur.total)}` : "…"}`;
  } else if (c.unembedded_chunks > 0 && c.chunk_count > 0) {
    [value, max] = [c.chunk_count - c.unembedded_chunks, c.chunk_count];
    label = `embedding: ${fmt(value)} of ${plural(max, "chunk")}`;
  }
  r.box.hidden = value === null;
  if (value === null) return;
  r.progress.max = max;
  if (value === undefined) r.progress.removeAttribute("value");  // indeterminate
  else r.progress.value = value;
  r.label.textContent = label;
}

/** Show Pause or Resume; the focus follows when it was on the other one. */
function setPaused(paused) {
  const focused = [$("#pause"), $("#resume")].includes(document.activeElement);
  $("#pause").hidden = paused;
  $("#resume").hidden = !paused;
  if (focused) $(paused ? "#resume" : "#pause").focus();
}

function renderStatus(st) {
  $("#status-line").textContent = statusLine(st);
  setPaused(!!st.paused);

  const list = $("#collections"), seen = new Set();
  (st.collections || []).forEach((c, idx) => {
    seen.add(c.name);
    if (!rowsByName.has(c.name)) rowsByName.set(c.name, makeCollectionRow(c.name));
    const r = rowsByName.get(c.name);
    updateCollectionRow(r, c, st);
    if (list.children[idx] !== r.li) list.insertBefore(r.li, list.children[idx] || null);
  });
  for (const [name, r] of rowsByName) if (!seen.has(name)) { r.li.remove(); rowsByName.delete(name); }

  const queue = st.queue || [];
  const names = queue.map((q) => (typeof q === "string" ? q : q && (q.collection || q.name || q.kind)) || "?");
  const ix = st.indexing || {};
  $("#queue").textContent = [queue.length ? `${plural(queue.length, "job")} waiting: ${names.join(", ")}.` : "Nothing waiting.",
    ix.remaining ? `${plural(ix.remaining, "item")} to index.` : "",
    ix.unembedded_chunks ? `${plural(ix.unembedded_chunks, "chunk")} to embed.` : ""].filter(Boolean).join(" ");

  const jobs = [...(st.small_jobs || [])].sort((a, b) => (b.at || 0) - (a.at || 0)).slice(0, 5);
  $("#saves").replaceChildren(...(jobs.length ? jobs.map((j) => {
    const secs = j.visible_s ?? j.total_s;
    const paths = j.paths || [];
    const what = paths.length > 1 ? `${paths[0]} and ${paths.length - 1} more` : paths[0] || "";
    return el("li", {}, el("strong", {}, `${Number(secs || 0).toFixed(2)} s`),
      ` ${what} (${j.collection}, ${when(j.at)})`);
  }) : [el("li", {}, "No saves since ragd started.")]));

  const errors = (st.errors || []).slice(-10).reverse();
  $("#errors").replaceChildren(...(errors.length ? errors.map((e) =>
    el("li", {}, `${when(e.time)}: ${e.error}`, e.path ? el("span", { class: "path" }, ` ${e.path}`) : null))
    : [el("li", {}, "None.")]));
}

/** Call a control method (pause, resume, reindex), tell the person, refresh. */
async function control(method, params, message) {
  try {
    const r = await api(method, params);
    clearError("control");
    notify(message);
    poll();
    return r;
  } catch (e) { showError(e, "control"); return null; }
}

const reindex = (name) => control("reindex", name ? { collection: name } : {},
  name ? `Reindexing ${name}: queued.` : "Reindexing everything: queued.");

/* ---------- skipped ---------- */

let skipRows = [];
const retried = new Set();  // "collection\0path" of rows queued again

const skipCode = (r) => r.skip_code || (r.status === "ok" ? "warning" : "");

/** The address says which collection and code are shown: #/skipped?collection=notes&code=… */
async function loadSkipped(params) {
  for (const [key, id] of [["collection", "#skip-collection"], ["code", "#skip-code"]]) {
    fillSelect($(id), [...$(id).options].slice(1).map((o) => o.value), params.get(key) || "");
  }
  try {
    skipRows = await api("skipped");
    clearError("skipped");
  } catch (e) { showError(e, "skipped"); skipRows = []; }
  fillSelect($("#skip-code"), skipRows.map(skipCode).filter(Boolean).sort());
  renderSkipped();
}

/** Keep the address in step with the selects, without a history entry. */
function onSkipSelect() {
  const p = new URLSearchParams();
  if ($("#skip-collection").value) p.set("collection", $("#skip-collection").value);
  if ($("#skip-code").value) p.set("code", $("#skip-code").value);
  history.replaceState(null, "", `#/skipped${p.toString() ? "?" + p : ""}`);
  renderSkipped();
}

function renderSkipped() {
  const text = $("#skip-filter").value.trim().toLowerCase();
  const col = $("#skip-collection").value, code = $("#skip-code").value;
  const rows = skipRows.filter((r) => (!col || r.collection === col)
    && (!code || skipCode(r) === code)
    && (!text || [r.path, skipCode(r), r.reason, r.skip_detail, r.warnings].join("\n").toLowerCase().includes(text)));
  $("#skipped-table tbody").replaceChildren(...rows.slice(0, MAX_SKIP_ROWS).map(skipRow));
  let count = `${fmt(rows.length)} of ${plural(skipRows.length, "file")}`;
  if (rows.length > MAX_SKIP_ROWS) count += `; showing the first ${MAX_SKIP_ROWS}, filter to see others`;
  $("#skip-count").textContent = count + ".";
}

function skipRow(r) {
  const key = `${r.collection}\0${r.path}`;
  const state = el("span", { class: "retry-state" }, retried.has(key) ? "queued" : "");
  const button = el("button", { type: "button", class: "small retry", "aria-label": `Retry ${r.path}` }, "Retry");
  button.addEventListener("click", async () => {
    try {
      await api("retry", { collection: r.collection, path: r.path });
      retried.add(key);
      state.textContent = "queued";
      notify(`Queued ${r.path} for another try.`);
    } catch (e) { showError(e, "retry"); }
  });
  const reason = r.reason || r.warnings || "";
  const detail = r.skip_detail && r.skip_detail !== reason ? r.skip_detail : "";
  const td = (cls, label, ...kids) => el("td", { class: cls, "data-label": label }, ...kids);
  return el("tr", { class: `skip-row ${r.status === "ok" ? "is-warning" : "is-skipped"}` },
    td("skip-path", "Path", r.path),
    td("skip-collection", "Collection", r.collection),
    td("skip-code", "Code", skipCode(r)),
    td("skip-reason", "Reason", reason, detail && el("span", { class: "detail" }, detail)),
    td("skip-hint", "Hint", r.hint || ""),
    td("skip-action", "", button, " ", state));
}

/* ---------- sources ---------- */

async function loadSources() {
  try {
    const s = await api("sources");
    clearError("sources");
    const empty = (text) => [el("li", { class: "empty" }, text)];
    const watched = (s.watched || []).map(watchedItem);
    const found = (s.discovered || []).map(discoveredItem);
    $("#watched").replaceChildren(...(watched.length ? watched : empty("Nothing is indexed yet.")));
    $("#discovered").replaceChildren(...(found.length ? found : empty("Nothing else found.")));
  } catch (e) { showError(e, "sources"); }
}

function watchedItem(w) {
  const li = el("li", { class: "watched", "data-name": w.name },
    el("h4", { class: "w-name" }, w.name, " ", el("span", { class: "tag" }, w.type || "")),
    el("p", { class: "path" }, w.root || ""),
    el("p", {}, plural(w.source_count || 0, "source"), w.stopped ? ` · stopped: ${w.stopped}` : ""));
  if (w.removable) {
    li.append(el("button", { type: "button", class: "small remove", "aria-label": `Remove ${w.name}`,
      onclick: () => removeSource(w) }, "Remove"));
  }
  return li;
}

/** A folder found on this machine that nothing indexes: it is read with its kind's own
 *  rules (a vault's links, a mailbox's threads) once config.toml names it, so the page shows
 *  the lines to add, with a button that copies them. */
function discoveredItem(d) {
  const lines = d.config || "";
  const button = el("button", { type: "button", class: "small copy-config",
    "aria-label": `Copy the config.toml lines for ${d.path}` }, "Copy the lines");
  button.addEventListener("click", async () => {
    try { await navigator.clipboard.writeText(lines); notify("Copied: paste them into config.toml."); }
    catch { notify("Select the lines and copy them."); }
  });
  return el("li", { class: "discovered" },
    el("h4", {}, d.label || d.path, " ", el("span", { class: "tag" }, d.kind || "")),
    el("p", { class: "path" }, d.path),
    el("p", {}, "To index it, add to config.toml (`ragd doctor` shows where it is):"),
    el("pre", { class: "config-lines" }, lines), button);
}

/** Ask with the <dialog>; resolves true when the person confirms. */
function confirmDialog(text, okLabel) {
  const dlg = $("#confirm");
  $("#confirm-text").textContent = text;
  $("#confirm-ok").textContent = okLabel;
  dlg.returnValue = "";
  return new Promise((resolve) => {
    dlg.addEventListener("close", () => resolve(dlg.returnValue === "ok"), { once: true });
    dlg.showModal();
  });
}

async function removeSource(w) {
  const ok = await confirmDialog(`Remove "${w.name}" from ragd? Its index is deleted; `
    + `your files in ${w.root || "its folder"} are not touched.`, `Remove ${w.name}`);
  if (!ok) return;
  try {
    await api("remove_source", { name: w.name });
    notify(`Removed ${w.name}.`);
    $("#sources-h").focus();
    loadSources();
    loadCollections();
  } catch (e) { showError(e, "sources"); }
}

async function addSource(params) {
  const msg = $("#add-message");
  msg.textContent = "";
  try {
    const r = await api("add_source", params);
    clearError("add");
    msg.textContent = `Indexing ${r.collection}…`;
    loadSources();
    loadCollections();
    return true;
  } catch (e) { showError(e, "add"); return false; }
}

async function onAddSubmit(e) {
  e.preventDefault();
  const path = $("#add-path").value.trim(), name = $("#add-name").value.trim();
  if (!path) { $("#add-path").focus(); return; }
  const params = { path, kind: $("#add-kind").value };
  if (name) params.name = name;
  $("#add-path").removeAttribute("aria-invalid");
  if (await addSource(params)) { $("#add-path").value = ""; $("#add-name").value = ""; }
  else { $("#add-path").setAttribute("aria-invalid", "true"); $("#add-path").focus(); }
}

/* ---------- wiring ---------- */

const isTyping = (t) => t instanceof HTMLElement
  && (t.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(t.tagName));

function onGlobalKey(e) {
  if ($("#confirm").open) return;  // the dialog has its own keys
  if (e.altKey && !e.ctrlKey && !e.metaKey && /^Digit[1-4]$/.test(e.code)) {
    e.preventDefault();
    go(VIEWS[Number(e.code.slice(5)) - 1]);
  } else if (e.key === "/" && !e.ctrlKey && !e.metaKey && !e.altKey && !isTyping(e.target)) {
    e.preventDefault();
    if (view !== "search") location.hash = "#/search";
    focusSearch(true);
  }
}

function init() {
  $("#search-form").addEventListener("submit", (e) => { e.preventDefault(); runSearch(); });
  $("#q").addEventListener("input", scheduleSearch);
  $("#q").addEventListener("keydown", (e) => {
    if (e.key === "ArrowDown" && results.length) { e.preventDefault(); select(Math.max(selected, 0)); }
  });
  for (const id of ["#f-collection", "#f-type", "#f-from", "#f-to"]) $(id).addEventListener("change", runSearch);
  for (const id of ["#f-sender", "#f-author", "#f-tag"]) $(id).addEventListener("input", scheduleSearch);
  $("#f-clear").addEventListener("click", () => {
    for (const id of ["#f-collection", "#f-type", "#f-from", "#f-to", "#f-sender", "#f-author", "#f-tag"]) $(id).value = "";
    runSearch();
  });
  $("#results").addEventListener("keydown", onResultsKey);

  $("#pause").addEventListener("click", async () => {
    const r = await control("pause", {}, "Indexing paused.");
    if (r) setPaused(!!r.paused);
  });
  $("#resume").addEventListener("click", async () => {
    const r = await control("resume", {}, "Indexing resumed.");
    if (r) setPaused(!!r.paused);
  });
  $("#reindex").addEventListener("click", () => reindex(null));

  $("#skip-filter").addEventListener("input", renderSkipped);
  $("#skip-collection").addEventListener("change", onSkipSelect);
  $("#skip-code").addEventListener("change", onSkipSelect);

  $("#add-form").addEventListener("submit", onAddSubmit);
  $("#alert-close").addEventListener("click", () => { clearError(); go(view); });

  document.addEventListener("keydown", onGlobalKey);
  document.addEventListener("visibilitychange", () => { if (!document.hidden) poll(); });
  window.addEventListener("hashchange", () => route(true));

  if (location.hash && !location.hash.startsWith("#/")) history.replaceState(null, "", "#/search");
  route(false);
  loadCollections();
  poll();
}

init();
