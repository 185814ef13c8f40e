// The dashboard (docs/dashboard.md): polls /api/v1/snapshot at the agent's sampling interval,
// draws one card per GPU, one uPlot chart per metric with every GPU overlaid (history from
// /api/v1/history, then live samples appended), the process table (with, for a viewer the
// agent's visibility policy filters, one row per GPU summing other users' processes), the
// alerts, the training runs (/api/v1/runs, a run's report on click) and the GPU usage by user or
// job over a time range (/api/v1/usage, refreshed every minute). When the agent goes
// away the page says so and keeps retrying; when it is back, it reloads history.
import {
  CHARTS, RANGES, alertText, appendPoint, badges, fmtBytes, fmtBytesPair, fmtCelsius, fmtClock,
  customRange, fmtDuration, fmtPair, fmtPercent, gpuColor, hiddenRows, hiddenText, historyUrl,
  processRows,
  runRows, runSummary, runsNote, sparkPoints, tableRows, toSeries, tokenBucket, trimToCommon,
  visibilityNote, compareReports, grafanaJobUrl, runRanks,
} from './format.js';
import {nvlinkText} from './format.js';
import {migCards, migUtilNote} from './format.js';
import {logSeries, tagsText} from './format.js';
import {tickLabels, timeRange, valueRange} from './format.js';
import {USAGE_RANGES, usageNote, usageRows, usageUrl} from './format.js';

const uPlot = globalThis.uPlot;
const SPARK_N = 120;
const HISTORY_REFRESH_MS = 60000;
const FETCH_PARALLEL = 4;
const RUNS_REFRESH_MS = 5000;
const USAGE_REFRESH_MS = 60000;
// History requests: 20/s after a burst of 40, well inside the agent's default limit.
const historyBucket = tokenBucket(20, 40, performance.now());

const state = {
  range: RANGES[0],
  gpus: [], // [{index, name}] of the cards and chart series
  cards: new Map(), // index -> element refs
  charts: new Map(), // chart id -> {def, u, data, el, zoomed}
  recent: [], // the last snapshots' chart values: [{t, values: {chartId: [...]}}]
  hidden: new Set(), // GPU indexes switched off in the charts
  spark: new Map(), // index -> utilization ratios
  sort: {key: 'gpu', dir: 'asc'},
  rows: [],
  hiddenRows: [], // one row per GPU with other users' processes (a filtered viewer)
  runs: [], // rows of the Runs list
  runsAt: 0, // performance.now() of the last /api/v1/runs request
  runSelected: null, // id of the run whose report is shown
  runReport: null,
  grafanaUrl: null, // the agent's grafana_url (the job link), from /api/v1/runs
  compare: [], // the ids of the runs ticked for comparison, oldest first (at most 2)
  compareReports: null, // their reports, once both are loaded
  snapshot: null,
  lastT: null,
  intervalS: 1, // the shortest of the last gaps between two snapshots: the agent's interval
  gaps: [],
  online: false,
  historyGen: 0,
  historyTimer: null,
  historyNote: '',
  historyOff: false,
  usage: {by: 'user', range: USAGE_RANGES[1], at: -Infinity, gen: 0, rows: []},
};
globalThis.__gpuscope = state; // read by tests/e2e/web_e2e.mjs

const $ = (id) => document.getElementById(id);

function el(tag, attrs = {}, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = v;
    else e.setAttribute(k, v);
  }
  for (const k of kids) if (k != null) e.append(k);
  return e;
}

function setStatus(text, cls) {
  const s = $('status');
  s.textContent = text;
  s.className = `status ${cls}`;
}

function banner(text) {
  const b = $('banner');
  b.hidden = !text;
  b.textContent = text || '';
}

// ---- cards ----

// Whether the snapshot's GPU g (buildCards gets index and name only) has NVLink links.
function hasNvlink(g) {
  const full = (state.snapshot?.gpus ?? []).find((x) => x.index === g.index);
  return nvlinkText(full ?? g) != null;
}

function buildCards(gpus) {
  const root = $('cards');
  root.replaceChildren();
  state.cards.clear();
  if (!gpus.length) {
    root.append(el('p', {class: 'empty', text:
      'No GPU found: the driver is loaded but reports no devices on this node (or the ' +
      'agent\'s visibility policy, gpu_visibility = used, shows you none).'}));
    return;
  }
  for (const g of gpus) {
    const refs = {};
    const row = (label, key, long) => {
      refs[key] = el('dd');
      return [el('dt', {text: label, title: long}), refs[key]];
    };
    refs.title = el('h3');
    refs.name = el('div', {class: 'name'});
    refs.meterFill = el('span');
    const meter = el('div', {class: 'meter', role: 'meter', 'aria-label': 'utilization',
      'aria-valuemin': '0', 'aria-valuemax': '100'}, refs.meterFill);
    refs.meter = meter;
    const dl = el('dl', {}, ...row('Util', 'util', 'GPU utilization'),
      ...row('Memory', 'mem', 'memory used / total'), ...row('Temp', 'temp', 'GPU temperature'),
      ...row('Power', 'power', 'power draw / enforced limit'),
      ...row('Clocks', 'clocks', 'SM clock / memory clock'),
      ...row('PCIe', 'pcie', 'PCIe link generation and width'),
      ...(hasNvlink(g) ? row('NVLink', 'nvlink',
        'NVLink links active / present, data throughput, data-link errors') : []));
    const svgNS = 'http://www.w3.org/2000/svg';
    const svg = document.createElementNS(svgNS, 'svg');
    svg.setAttribute('class', 'spark');
    svg.setAttribute('viewBox', '0 0 100 28');
    svg.setAttribute('preserveAspectRatio', 'none');
    svg.setAttribute('role', 'img');
    svg.setAttribute('aria-label', 'utilization, last minutes');
    refs.spark = document.createElementNS(svgNS, 'polyline');
    svg.append(refs.spark);
    refs.badges = el('div', {class: 'badges'});
    const card = el('article', {class: 'card', tabindex: '0', 'data-gpu': String(g.index)},
      refs.title, refs.name, meter, dl, svg, refs.badges);
    card.style.setProperty('--gpu-color', gpuColor(g.index));
    refs.card = card;
    state.cards.set(g.index, refs);
    root.append(card);
  }
}

function updateCard(g) {
  const r = state.cards.get(g.index);
  if (!r) return;
  r.title.textContent = `GPU ${g.index}`;
  r.name.textContent = g.name ?? 'unknown';
  r.name.title = `${g.name ?? ''} ${g.uuid ?? ''} ${g.pci_bus_id ?? ''}`.trim();
  r.card.classList.toggle('lost', !!g.lost);
  const util = g.utilization_gpu;
  r.util.textContent = fmtPercent(util);
  r.meterFill.style.width = `${Math.round(Math.min(1, Math.max(0, util ?? 0)) * 100)}%`;
  r.meter.setAttribute('aria-valuenow', String(Math.round((util ?? 0) * 100)));
  r.mem.textContent = fmtBytesPair(g.memory_used, g.memory_total);
  r.temp.textContent = fmtCelsius(g.temperature_gpu);
  r.power.textContent = fmtPair(g.power_draw, g.power_limit, 1, 'W');
  r.clocks.textContent = fmtPair(g.clock_sm, g.clock_memory, 1e-6, 'MHz');
  r.pcie.textContent = g.pcie_link_gen_current == null ? 'N/A'
    : `Gen${g.pcie_link_gen_current} x${g.pcie_link_width_current ?? '?'}`;
  if (r.nvlink) {
    const nl = nvlinkText(g);
    r.nvlink.textContent = nl ? nl.text : 'N/A';
    r.nvlink.title = nl ? nl.title : '';
    r.nvlink.classList.add('nvlink');
    r.nvlink.classList.toggle('warn', !!nl && (nl.down || nl.errors > 0));
  }
  const list = badges(g);
  r.badges.replaceChildren(...list.map((b) => el('span', {class: `badge ${b.kind}`,
    text: b.text})));
  const s = state.spark.get(g.index) ?? [];
  r.spark.setAttribute('points', sparkPoints(s, 100, 28));
}

// ---- charts ----

function themeColors() {
  const cs = getComputedStyle(document.documentElement);
  return {fg: cs.getPropertyValue('--muted').trim() || '#888',
    line: cs.getPropertyValue('--line').trim() || '#ccc'};
}

function buildToggles(gpus) {
  const root = $('gpu-toggles');
  root.replaceChildren();
  for (const g of gpus) {
    const box = el('input', {type: 'checkbox', 'data-gpu': String(g.index)});
    box.checked = !state.hidden.has(g.index);
    box.addEventListener('change', () => {
      if (box.checked) state.hidden.delete(g.index);
      else state.hidden.add(g.index);
      const i = state.gpus.findIndex((x) => x.index === g.index) + 1;
      for (const c of state.charts.values()) c.u?.setSeries(i, {show: box.checked});
    });
    const sw = el('span', {class: 'swatch'});
    sw.style.setProperty('--gpu-color', gpuColor(g.index));
    root.append(el('label', {}, box, sw, `GPU ${g.index}`));
  }
}

// Makes (or remakes, after a theme change) the uPlot of one chart entry, in the current
// theme's colours, with the entry's data.
function plot(entry, gpus) {
  const {def, el: box} = entry;
  const colors = themeColors();
  entry.u?.destroy();
  const axis = {stroke: colors.fg, grid: {stroke: colors.line, width: 1},
    ticks: {stroke: colors.line}};
  const opts = {
    width: Math.max(300, box.clientWidth - 10),
    height: 170,
    // a minute's time axis from the first point (auto ranging only: the data's own extent; a
    // drag zoom keeps what was selected); a flat series no finer than its labels
    scales: {x: {time: true, range: (u, min, max) => {
      const xs = u.data[0];
      return xs.length && min === xs[0] && max === xs[xs.length - 1]
        ? timeRange(min, max, 60) : [min, max];
    }},
      y: {range: def.range ?? ((u, min, max) => valueRange(min, max, def.step))}},
    legend: {live: true},
    cursor: {drag: {x: true, y: false}},
    series: [
      {value: (u, v) => (v == null ? '—' : fmtClock(v))},
      ...gpus.map((g) => ({
        label: `GPU ${g.index}`, stroke: gpuColor(g.index), width: 1.5,
        show: !state.hidden.has(g.index), spanGaps: false,
        value: (u, v) => (v == null ? '—' : def.fmt(v)),
      })),
    ],
    axes: [axis, {...axis, size: 86, values: (u, vals) => tickLabels(vals, def.fmt)}],
    hooks: {
      setSelect: [(u) => {
        if (u.select.width > 0) entry.zoomed = true;
      }],
      draw: [(u) => drawRunMarks(u, box, colors)],
    },
  };
  entry.u = new uPlot(opts, entry.data, box);
  entry.zoomed = false;
  entry.u.over.addEventListener('dblclick', () => {
    entry.zoomed = false;
  });
}

// The listed runs' start (solid) and end (dashed) as vertical lines on a GPU chart; the box
// carries data-run-marks (how many lines are in view) for tests.
function drawRunMarks(u, box, colors) {
  const {left, top, width, height} = u.bbox;
  const x0 = u.scales.x.min;
  const x1 = u.scales.x.max;
  const ctx = u.ctx;
  let n = 0;
  ctx.save();
  ctx.beginPath();
  ctx.rect(left, top, width, height);
  ctx.clip();
  ctx.strokeStyle = colors.fg;
  ctx.globalAlpha = 0.45;
  ctx.lineWidth = 1;
  for (const r of state.runs) {
    const end = r.state !== 'running' && r.start != null && r.duration != null ?
      r.start + r.duration : null;
    for (const [t, dash] of [[r.start, []], [end, [4, 3]]]) {
      if (t == null || x0 == null || t < x0 || t > x1) continue;
      const x = Math.round(u.valToPos(t, 'x', true)) + 0.5;
      ctx.setLineDash(dash);
      ctx.beginPath();
      ctx.moveTo(x, top);
      ctx.lineTo(x, top + height);
      ctx.stroke();
      n++;
    }
  }
  ctx.restore();
  box.dataset.runMarks = String(n);
}

function buildCharts(gpus) {
  for (const c of state.charts.values()) c.u?.destroy();
  state.charts.clear();
  const root = $('charts');
  root.replaceChildren();
  if (!gpus.length) return;
  for (const def of CHARTS) {
    const box = el('div', {class: 'chart', id: `chart-${def.id}`},
      el('h3', {text: `${def.title} (${def.unit})`}));
    root.append(box);
    const entry = {def, data: [[], ...gpus.map(() => [])], el: box, u: null, zoomed: false};
    plot(entry, gpus);
    if (def.optional) box.hidden = true;
    state.charts.set(def.id, entry);
  }
}

// Charts follow the window's width, and the theme when the system switches light/dark.
if (typeof ResizeObserver === 'function') {
  new ResizeObserver(() => {
    for (const c of state.charts.values())
      if (c.u && c.el.clientWidth > 0) c.u.setSize({width: c.el.clientWidth - 10, height: 170});
  }).observe($('charts'));
}
matchMedia('(prefers-color-scheme: dark)').addEventListener('change', () => {
  for (const c of state.charts.values()) plot(c, state.gpus);
});

function redraw(c) {
  c.u.setData(c.data, !c.zoomed);
}

async function fetchJson(url) {
  const r = await fetch(url, {cache: 'no-store'});
  let doc = null;
  try {
    doc = await r.json();
  } catch {
    doc = null;
  }
  return {status: r.status, doc};
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// A history request paced by historyBucket; a 429 (an agent with a lower http_rate) is retried
// once after the second the agent asks for.
async function fetchHistory(url) {
  for (let wait; (wait = historyBucket.take(performance.now())) > 0;) await sleep(wait);
  const r = await fetchJson(url);
  if (r.status !== 429) return r;
  await sleep(1000);
  return fetchJson(url);
}

// Runs the jobs FETCH_PARALLEL at a time; stops early once a newer history load started.
async function pool(jobs, gen) {
  const out = new Array(jobs.length).fill({status: 0, doc: null});
  let next = 0;
  const worker = async () => {
    while (next < jobs.length && gen === state.historyGen) {
      const i = next++;
      try {
        out[i] = await jobs[i]();
      } catch (e) {
        out[i] = {status: 0, doc: null, error: e};
      }
    }
  };
  await Promise.all(Array.from({length: FETCH_PARALLEL}, worker));
  return out;
}

async function loadHistory() {
  const gen = ++state.historyGen;
  clearTimeout(state.historyTimer);
  const range = state.range;
  const now = Date.now() / 1000;
  const gpus = state.gpus;
  const defs = CHARTS;
  if (!gpus.length) return;
  // One request first: with history = off (404) the page asks no more.
  const probe = await fetchHistory(historyUrl(gpus[0].index, defs[0].metric, range, now));
  if (gen !== state.historyGen) return; // a newer load started (range changed, reconnect)
  const jobs = [];
  for (const def of defs)
    for (const g of gpus)
      jobs.push(def === defs[0] && g === gpus[0] ? async () => probe
        : () => fetchHistory(historyUrl(g.index, def.metric, range, now)));
  const res = probe.status === 404 ? jobs.map(() => probe) : await pool(jobs, gen);
  if (gen !== state.historyGen) return;
  let off = false;
  let points = 0;
  defs.forEach((def, k) => {
    const mine = res.slice(k * gpus.length, (k + 1) * gpus.length);
    off ||= mine.some((r) => r.status === 404);
    const docs = trimToCommon(mine.map((r) => (r.status === 200 ? r.doc : null)),
      range.id === 'live');
    const c = state.charts.get(def.id);
    if (!c) return;
    c.data = toSeries(docs, def.scale);
    const n = docs.reduce((s, d) => s + (d?.points?.length ?? 0), 0);
    if (def.id === 'utilization') points = n;
    if (range.id === 'live') {
      for (const s of state.recent) {
        const vals = s.values[def.id];
        if (vals) appendPoint(c.data, s.t, vals, range.seconds);
      }
    }
    if (def.optional) {
      const live = c.data.slice(1).some((col) => col.some((v) => v != null));
      c.el.hidden = !live;
    }
    c.zoomed = false;
    redraw(c);
    if (def.id === 'utilization' && range.id === 'live') seedSparks(c.data);
  });
  let note = '';
  if (off)
    note = 'History is off on this agent (history = off): the charts show only the samples ' +
      'taken since this page opened.';
  else if (points === 0)
    note = 'History is filling: the agent writes samples to disk every few seconds ' +
      '(flush_interval); the charts grow as samples arrive.';
  setHistoryNote(note, off);
  if (range.id !== 'live')
    state.historyTimer = setTimeout(loadHistory, HISTORY_REFRESH_MS);
}

function setHistoryNote(note, off) {
  state.historyNote = note;
  state.historyOff = off;
  $('hist-note').hidden = !note;
  $('hist-note').textContent = note;
}

function seedSparks(data) {
  state.gpus.forEach((g, i) => {
    const col = data[i + 1];
    state.spark.set(g.index, col.slice(-SPARK_N).map((v) => (v == null ? null : v / 100)));
  });
}

function buildRanges() {
  const root = $('ranges');
  for (const r of RANGES) {
    const b = el('button', {type: 'button', 'data-range': r.id, text: r.label,
      'aria-pressed': String(r === state.range)});
    b.addEventListener('click', () => {
      state.range = r;
      for (const x of root.children)
        x.setAttribute('aria-pressed', String(x.dataset.range === r.id));
      loadHistory();
    });
    root.append(b);
  }
  // any range by date: local date and time from/to fields
  const from = el('input', {type: 'datetime-local', id: 'range-from', 'aria-label': 'from'});
  const to = el('input', {type: 'datetime-local', id: 'range-to', 'aria-label': 'to'});
  const go = el('button', {type: 'button', id: 'range-apply', text: 'Show'});
  const pick = el('span', {class: 'range-pick', 'data-range': 'custom'}, from, '–', to, go);
  go.addEventListener('click', () => {
    const r = customRange(Date.parse(from.value) / 1000, Date.parse(to.value) / 1000);
    if (!r) {
      setHistoryNote('Pick a start before the end (at most a year apart).', false);
      return;
    }
    state.range = r;
    for (const x of root.children)
      x.setAttribute('aria-pressed', String(x.dataset.range === r.id));
    loadHistory();
  });
  root.append(pick);
}

// ---- GPU usage (/api/v1/usage) ----

function buildUsage() {
  const root = $('usage-ranges');
  for (const r of USAGE_RANGES) {
    const b = el('button', {type: 'button', 'data-usage-range': String(r.seconds), text: r.label,
      'aria-pressed': String(r === state.usage.range)});
    b.addEventListener('click', () => {
      state.usage.range = r;
      for (const x of root.children)
        x.setAttribute('aria-pressed', String(x === b));
      loadUsage();
    });
    root.append(b);
  }
  $('usage-by').addEventListener('change', (e) => {
    state.usage.by = e.target.value;
    loadUsage();
  });
}

async function loadUsage() {
  const u = state.usage;
  const gen = ++u.gen;
  u.at = performance.now();
  const res = await fetchJson(usageUrl(u.by, u.range.seconds, Date.now() / 1000));
  if (gen !== u.gen) return; // a newer choice was made meanwhile
  u.rows = res.status === 200 ? usageRows(res.doc) : [];
  u.doc = res.doc;
  $('usage-key-h').textContent = u.by === 'job' ? 'Job' : 'User';
  $('usage').hidden = !u.rows.length;
  $('usage').tBodies[0].replaceChildren(...u.rows.map((r) => el('tr',
    {class: r.idle ? 'idle' : '', 'data-key': r.key},
    el('td', {text: r.key}), el('td', {text: r.user}), el('td', {class: 'num', text: r.held}),
    el('td', {class: 'num', text: r.busy}), el('td', {class: 'num idle-held', text: r.idleHeld}),
    el('td', {class: 'num', text: r.peak}), el('td', {class: 'num', text: r.energy}),
    el('td', {class: 'num', text: r.cost}))));
  const note = usageNote(res.doc, res.status);
  $('usage-note').hidden = !note;
  $('usage-note').textContent = note;
}

// ---- processes and alerts ----

const COLUMNS = [
  {key: 'gpu', label: 'GPU', num: true, fmt: (v) => String(v)},
  {key: 'pid', label: 'PID', num: true, fmt: (v) => String(v)},
  {key: 'user', label: 'User'},
  {key: 'container', label: 'Container / job'},
  {key: 'gpu_memory', label: 'GPU memory', num: true, fmt: (v) => fmtBytes(v)},
  {key: 'sm', label: 'SM', num: true, fmt: (v) => fmtPercent(v)},
  {key: 'cpu', label: 'CPU', num: true, fmt: (v) => fmtPercent(v)},
  {key: 'rss', label: 'Host memory', num: true, fmt: (v) => fmtBytes(v)},
  {key: 'running', label: 'Running', num: true, fmt: (v) => fmtDuration(v)},
  {key: 'command', label: 'Command'},
];

function buildTableHead() {
  const tr = $('procs').tHead.rows[0];
  for (const col of COLUMNS) {
    const b = el('button', {type: 'button', text: col.label, 'data-key': col.key});
    b.addEventListener('click', () => {
      const s = state.sort;
      state.sort = s.key === col.key ? {key: col.key, dir: s.dir === 'asc' ? 'desc' : 'asc'}
        : {key: col.key, dir: col.num ? 'desc' : 'asc'};
      renderTable();
    });
    tr.append(el('th', {scope: 'col', 'data-key': col.key}, b));
  }
}

function renderTable() {
  const {key, dir} = state.sort;
  for (const th of $('procs').tHead.rows[0].cells)
    th.setAttribute('aria-sort', th.dataset.key === key
      ? (dir === 'asc' ? 'ascending' : 'descending') : 'none');
  const rows = tableRows(state.rows, state.hiddenRows, key, dir);
  $('procs').tBodies[0].replaceChildren(...rows.map((r) => (r.hidden
    ? el('tr', {class: 'others', 'data-hidden-gpu': String(r.gpu)},
      el('td', {class: 'num', text: String(r.gpu)}),
      el('td', {colspan: String(COLUMNS.length - 1), text: hiddenText(r)}))
    : el('tr', {'data-pid': String(r.pid)}, ...COLUMNS.map((c) => {
      const v = r[c.key];
      const text = v == null ? '—' : c.fmt ? c.fmt(v) : String(v);
      return el('td', {class: c.key === 'command' ? 'cmd' : c.num ? 'num' : '', text});
    })))));
  const empty = $('procs-empty');
  empty.hidden = rows.length > 0;
  const note = visibilityNote(state.snapshot);
  $('vis-note').hidden = !note;
  $('vis-note').textContent = note;
  empty.textContent = 'No GPU processes right now (or none this agent may show: ' +
    'process visibility follows the agent\'s policy).';
}

function renderAlerts(doc) {
  const list = $('alerts');
  const empty = $('alerts-empty');
  const alerts = doc?.alerts ?? [];
  list.replaceChildren(...alerts.map((a) => el('li', {class: a.state, 'data-rule': a.rule},
    el('span', {class: 'state', text: a.state}),
    `${alertText(a)} · since ${fmtClock(a.since)}`,
    a.resolved_at ? ` · resolved ${fmtClock(a.resolved_at)}` : '',
    a.severity ? ` · ${a.severity}` : '')));
  empty.hidden = alerts.length > 0;
  empty.textContent = doc && doc.enabled === false
    ? 'Alerts are off on this agent (alerts = off).'
    : 'No alerts: nothing firing, pending or resolved in the last hour.';
}

// ---- training runs ----

function renderRuns(res) {
  const now = Date.now() / 1000;
  state.runs = res.status === 200 ? runRows(res.doc, now) : [];
  state.grafanaUrl = res.status === 200 ? res.doc?.grafana_url ?? null : null;
  $('runs').hidden = !state.runs.length;
  $('runs').tBodies[0].replaceChildren(...state.runs.map((r) => {
    const b = el('button', {type: 'button', 'data-run': String(r.id), text: r.name,
      'aria-expanded': String(r.id === state.runSelected)});
    b.addEventListener('click', () => selectRun(r.id === state.runSelected ? null : r.id));
    const tick = el('input', {type: 'checkbox', 'data-compare': String(r.id),
      'aria-label': `compare ${r.name}`});
    tick.checked = state.compare.includes(r.id);
    tick.addEventListener('change', () => toggleCompare(r.id, tick.checked));
    return el('tr', {'data-run': String(r.id), class: r.id === state.runSelected ? 'sel' : ''},
      el('td', {}, tick), el('td', {}, b), el('td', {text: r.user}),
      el('td', {text: r.state,
        class: r.stalled ? 'stalled' : r.interrupted ? 'interrupted' : ''}),
      el('td', {text: fmtClock(r.start)}), el('td', {class: 'num', text: fmtDuration(r.duration)}),
      el('td', {class: 'num', text: r.steps == null ? '—' : String(r.steps)}),
      el('td', {text: r.ratios}), el('td', {text: r.findings.join(', ') || '—'}),
      el('td', {class: 'run-tags-cell', text: r.tags || '—'}));
  }));
  const note = runsNote(res.doc, res.status);
  $('runs-note').hidden = !note;
  $('runs-note').textContent = note;
  if (state.runSelected != null && !state.runs.some((r) => r.id === state.runSelected))
    selectRun(null);
  const before = state.compare.length;
  state.compare = state.compare.filter((id) => state.runs.some((r) => r.id === id));
  if (state.compare.length !== before) loadCompare();
}

async function loadRuns() {
  state.runsAt = performance.now();
  const res = await fetchJson('/api/v1/runs');
  renderRuns(res);
  // a running run's report changes: refresh the one shown
  const sel = state.runs.find((r) => r.id === state.runSelected);
  if (sel && sel.state === 'running') await loadRunReport(sel.id);
}

async function loadRunReport(id) {
  const r = await fetchJson(`/api/v1/runs/${encodeURIComponent(id)}`);
  if (id !== state.runSelected) return;
  state.runReport = r.status === 200 ? r.doc : null;
  renderRunDetail(r.status === 200 ? null : (r.doc?.error ?? `HTTP ${r.status}`));
}

function selectRun(id) {
  state.runSelected = id;
  state.runReport = null;
  for (const tr of $('runs').tBodies[0].rows) {
    const mine = tr.dataset.run === String(id);
    tr.className = mine ? 'sel' : '';
    tr.querySelector('button')?.setAttribute('aria-expanded', String(mine));
  }
  renderRunDetail(null);
  if (id != null) loadRunReport(id);
}

function miniTable(head, rows, cls) { // in a box that scrolls sideways on a narrow screen
  return el('div', {class: 'table-wrap'}, el('table', {class: cls}, el('thead', {}, el('tr', {},
    ...head.map((h) => el('th', {scope: 'col', text: h})))),
  el('tbody', {}, ...rows.map((r) => el('tr', {},
    ...r.map((v, i) => el('td', {class: i ? 'num' : '', text: v})))))));
}

function renderRunDetail(error) {
  const box = $('run-detail');
  box.hidden = state.runSelected == null;
  if (box.hidden) return box.replaceChildren();
  const run = state.runs.find((r) => r.id === state.runSelected);
  const title = el('h3', {text: `${run?.name ?? `run ${state.runSelected}`} · report`});
  if (error) return box.replaceChildren(title, el('p', {class: 'empty', text: error}));
  if (!state.runReport) return box.replaceChildren(title, el('p', {class: 'empty',
    text: 'Loading the report…'}));
  const s = runSummary(state.runReport);
  const kids = [title, el('dl', {class: 'figures'},
    ...s.headline.flatMap(([k, v]) => [el('dt', {text: k}), el('dd', {text: v})]))];
  if (s.phases.length)
    kids.push(el('h4', {text: 'Step phases'}), miniTable(['phase', 'mean ms', 'p50 ms',
      'p95 ms', 'total s', 'count'], s.phases, 'phases'));
  if (s.gpus.length)
    kids.push(el('h4', {text: 'GPUs'}), miniTable(['GPU', 'name', 'util avg', 'util max',
      'memory peak', 'energy', 'throttled'], s.gpus, 'run-gpus'));
  runJob(kids, state.runReport);
  kids.push(el('h4', {text: 'Findings'}));
  if (!s.findings.length)
    kids.push(el('p', {class: 'empty', text: 'No findings: no rule fired on this report.'}));
  else
    kids.push(el('ul', {class: 'findings'}, ...s.findings.map((f) => el('li',
      {class: f.severity, 'data-finding': f.id},
      el('span', {class: 'state', text: f.severity}), `${f.id}: ${f.title}`,
      f.advice.length ? el('ul', {}, ...f.advice.map((a) => el('li', {text: a}))) : null))));
  // the whole run (GPU charts over the run, every step, curves) as one page: on the node
  kids.push(el('p', {class: 'empty', 'data-report-hint': '', text: 'Charts of the whole run: ' +
    `gpuscope report ${state.runSelected} (an HTML file; docs/report-html.md)`}));
  box.replaceChildren(...kids);
  runCurves(box, state.runSelected, state.runReport);
}

// ---- a run's training curves and tags ----

const CURVE_PAGES = 20; // 20,000 logged records at most (1000 a page)
// The records fetched for the run shown: a running run's refresh asks only for newer ones
// (the agent appends records in arrival order; `from` indexes them).
const curvesCache = {id: null, logs: []};

// Under the run's report (renderRunDetail): its tags, and its training curves from
// /api/v1/runs/ID/logs (loss on the left axis, learning rate on the right, over the steps)
// when it logged any; an agent without the endpoint or with history off draws nothing. The
// chart box carries data-points (records drawn) and, as .gsPlot, its uPlot (for tests). A
// newer render (a running run's refresh) supersedes this one.
async function runCurves(box, id, rep) {
  const gen = (box.curvesGen = (box.curvesGen ?? 0) + 1);
  const tags = tagsText(rep?.run?.tags);
  if (tags) box.querySelector('h3')?.after(el('p', {class: 'run-tags', text: `tags: ${tags}`}));
  const logs = curvesCache.id === id ? [...curvesCache.logs] : [];
  for (let from = logs.length, page = 0; from != null && page < CURVE_PAGES &&
    logs.length < CURVE_PAGES * 1000; page++) {
    const r = await fetchJson(`/api/v1/runs/${encodeURIComponent(id)}/logs?from=${from}` +
      '&limit=1000');
    if (r.status !== 200 || !Array.isArray(r.doc?.logs)) break;
    logs.push(...r.doc.logs);
    from = r.doc.next ?? null;
  }
  if (gen !== box.curvesGen || id !== state.runSelected || !box.isConnected) return;
  curvesCache.id = id;
  curvesCache.logs = logs;
  box.curvesPlot?.destroy();
  box.curvesPlot = null;
  const s = logSeries(logs);
  if (!s.x.length || !s.series.length) return;
  const colors = themeColors();
  const axis = {stroke: colors.fg, grid: {stroke: colors.line, width: 1},
    ticks: {stroke: colors.line}};
  const sci = (v) => (v == null ? '—' : v === 0 ? '0' :
    Math.abs(v) >= 1e-2 && Math.abs(v) < 1e4 ? String(+v.toPrecision(4)) : v.toExponential(2));
  const names = {loss: 'loss', learning_rate: 'learning rate'};
  const wrap = el('div', {class: 'chart run-curves', 'data-points': String(s.x.length)},
    el('h4', {text: `Training curves (${s.x.length} logged record` +
      `${s.x.length === 1 ? '' : 's'}${s.time ? ', over time' : ', over steps'})`}));
  box.append(wrap);
  const series = s.series.map((c, i) => ({label: names[c.key] ?? c.key, scale: c.key,
    stroke: gpuColor(i), width: 1.5, spanGaps: true, value: (u, v) => sci(v),
    points: {show: s.x.length <= 60}}));
  const axes = [{...axis, ...(s.time ? {} : {values: (u, vals) => vals.map((v) => String(v))})},
    ...s.series.map((c, i) => ({...axis, scale: c.key, side: i ? 1 : 3, size: 70,
      grid: i ? {show: false} : axis.grid, values: (u, vals) => vals.map(sci)}))];
  const u = new uPlot({
    width: Math.max(200, wrap.clientWidth - 10), height: 190,
    scales: {x: {time: s.time}},
    legend: {live: true},
    series: [{label: s.time ? 'time' : 'step',
      value: (u2, v) => (v == null ? '—' : s.time ? fmtClock(v) : String(v))}, ...series],
    axes,
  }, [s.x, ...s.series.map((c) => c.values)], wrap);
  wrap.gsPlot = u;
  box.curvesPlot = u;
  // follows the page's width, like the GPU charts
  if (typeof ResizeObserver === 'function') {
    const ro = new ResizeObserver(() => {
      if (!wrap.isConnected) return ro.disconnect();
      if (wrap.clientWidth > 0)
        u.setSize({width: Math.max(200, wrap.clientWidth - 10), height: 190});
    });
    ro.observe(wrap);
  }
}

// The run's job and its ranks on this node (docs/dashboard.md, RUNS): the per-rank table and
// the straggler with two ranks or more, the job id with a link to the Grafana job dashboard
// when the agent has grafana_url.
function runJob(kids, rep) {
  const job = rep?.run?.job;
  const ranks = runRanks(rep);
  if (job) {
    const url = grafanaJobUrl(state.grafanaUrl, job);
    kids.push(el('p', {class: 'job', 'data-job': job}, `Job ${job}`, url ? ' · ' : null,
      url ? el('a', {href: url, target: '_blank', rel: 'noopener noreferrer',
        text: 'all its ranks in Grafana'}) : null));
  }
  if (ranks.rows.length < 2) return;
  kids.push(el('h4', {text: 'Ranks on this node'}), miniTable(['rank', 'GPU', 'steps',
    'step p50 ms', 'p95 ms', 'data ms', 'comm ms', 'samples/s', 'tokens/s', 'MFU'], ranks.rows,
  'run-ranks'));
  if (ranks.slowest) kids.push(el('p', {class: 'slowest', text: ranks.slowest}));
}

// ---- comparing two runs ----

function toggleCompare(id, on) {
  state.compare = state.compare.filter((x) => x !== id);
  if (on) state.compare.push(id);
  if (state.compare.length > 2) state.compare.shift(); // the two picked last
  for (const b of document.querySelectorAll('input[data-compare]'))
    b.checked = state.compare.includes(Number(b.dataset.compare));
  loadCompare();
}

async function loadCompare() {
  const ids = [...state.compare];
  state.compareReports = null;
  renderCompare(null);
  if (ids.length !== 2) return;
  const res = await Promise.all(ids.map((id) =>
    fetchJson(`/api/v1/runs/${encodeURIComponent(id)}`)));
  if (ids.join() !== state.compare.join()) return; // the ticks changed meanwhile
  const bad = res.find((r) => r.status !== 200);
  if (bad) return renderCompare(bad.doc?.error ?? `HTTP ${bad.status}`);
  state.compareReports = res.map((r) => r.doc);
  renderCompare(null);
}

function renderCompare(error) {
  const box = $('run-compare');
  box.hidden = state.compare.length === 0;
  if (box.hidden) return box.replaceChildren();
  const name = (id) => state.runs.find((r) => r.id === id)?.name ?? `run ${id}`;
  const [a, b] = state.compare;
  if (state.compare.length < 2)
    return box.replaceChildren(el('p', {class: 'empty',
      text: `Tick a second run to compare it with ${name(a)}.`}));
  const title = el('h3', {text: `A ${name(a)} · B ${name(b)}`});
  if (error) return box.replaceChildren(title, el('p', {class: 'empty', text: error}));
  if (!state.compareReports) return box.replaceChildren(title, el('p', {class: 'empty',
    text: 'Loading both reports…'}));
  const c = compareReports(...state.compareReports);
  const table = (head, rows) => el('div', {class: 'table-wrap'}, el('table', {class: 'compare'},
    el('thead', {}, el('tr', {}, ...head.map((h) => el('th', {scope: 'col', text: h})))),
    el('tbody', {}, ...rows.map((r) => el('tr', {}, el('td', {text: r[0]}),
      ...r.slice(1, 5).map((v, i) => el('td', {class: i >= 2 && r[5] ? `num ${r[5]}` : 'num',
        text: v})))))));
  const kids = [title, table(['field', 'A', 'B', 'change', 'change %'], c.fields)];
  if (c.phases.length)
    kids.push(table(['phase (mean ms)', 'A', 'B', 'change', 'change %'], c.phases));
  kids.push(el('h4', {text: 'Settings that differ'}), c.facts.length
    ? el('ul', {class: 'facts'}, ...c.facts.map(([k, x, y]) =>
      el('li', {text: `${k}  ${x} → ${y}`})))
    : el('p', {class: 'empty', text: 'The same settings (facts) in both runs.'}));
  kids.push(el('h4', {text: 'Findings'}), c.findings.length
    ? el('ul', {class: 'facts'}, ...c.findings.map(([id, x, y, v]) =>
      el('li', {'data-finding': id, text: `${id}  A: ${x}  B: ${y}  ${v}`})))
    : el('p', {class: 'empty', text: 'No findings in either run.'}));
  box.replaceChildren(...kids);
}

// ---- the polling loop ----

function chartValues(g, def) {
  const v = g[def.metric];
  return typeof v === 'number' ? def.scale(v) : null;
}

function onSnapshot(doc) {
  const gpus = (doc.gpus ?? []).map((g) => ({index: g.index, name: g.name}));
  const same = gpus.length === state.gpus.length &&
    gpus.every((g, i) => g.index === state.gpus[i].index);
  state.snapshot = doc;
  $('host').textContent = [doc.hostname, doc.driver_version && `driver ${doc.driver_version}`,
    doc.cuda_version && `CUDA ${doc.cuda_version}`].filter(Boolean).join(' · ');
  $('simulated').hidden = doc.simulated !== true;
  if (!same || !state.cards.size) {
    state.gpus = gpus;
    buildCards(gpus);
    buildToggles(gpus);
    buildCharts(gpus);
    state.recent = [];
    loadHistory();
  }
  const t = doc.query_time_unix;
  const fresh = typeof t === 'number' && (state.lastT == null || t > state.lastT);
  if (fresh) {
    if (state.lastT != null) {
      state.gaps.push(Math.min(60, Math.max(0.1, t - state.lastT)));
      if (state.gaps.length > 8) state.gaps.shift();
      state.intervalS = Math.min(...state.gaps);
    }
    state.lastT = t;
    const values = {};
    for (const def of CHARTS) values[def.id] = (doc.gpus ?? []).map((g) => chartValues(g, def));
    state.recent.push({t, values});
    if (state.recent.length > 60) state.recent.shift();
    for (const g of doc.gpus ?? []) {
      const s = state.spark.get(g.index) ?? [];
      s.push(typeof g.utilization_gpu === 'number' ? g.utilization_gpu : null);
      if (s.length > SPARK_N) s.shift();
      state.spark.set(g.index, s);
    }
    if (state.range.id === 'live') {
      // "History is filling" holds only until the live samples have drawn a line.
      if (state.historyNote && !state.historyOff &&
        (state.charts.get('utilization')?.data[0].length ?? 0) > 1)
        setHistoryNote('', false);
      for (const c of state.charts.values()) {
        appendPoint(c.data, t, values[c.def.id], state.range.seconds);
        if (c.def.optional && c.el.hidden && values[c.def.id].some((v) => v != null))
          c.el.hidden = false;
        redraw(c);
      }
    }
  }
  for (const g of doc.gpus ?? []) updateCard(g);
  for (const g of doc.gpus ?? []) updateMig(g);
  updateMigNote(doc);
}

// ---- MIG devices: cards under their GPU's card, a note on the utilization chart ----

function migCard(m) {
  const fill = el('span');
  fill.style.width = `${Math.round((m.ratio ?? 0) * 100)}%`;
  const pct = String(Math.round((m.ratio ?? 0) * 100));
  const bar = el('div', {class: 'meter', role: 'meter', 'aria-label': `${m.title} memory`,
    'aria-valuemin': '0', 'aria-valuemax': '100', 'aria-valuenow': pct}, fill);
  const procs = m.procs.length ? m.procs.map((p) => el('li', {text: p.text}))
    : [el('li', {class: 'empty', text: 'no processes'})];
  return el('div', {class: 'mig', role: 'listitem', 'data-mig': m.key, title: m.uuid ?? ''},
    el('div', {class: 'mig-head'}, el('strong', {text: m.title}),
      el('span', {class: 'mig-ids', text: m.ids})),
    el('div', {class: 'mig-mem', text: `Memory ${m.mem}`}), bar,
    m.gr != null ? el('div', {class: 'mig-gr', text: `Graphics active ${fmtPercent(m.gr)}`})
      : null,
    el('ul', {class: 'mig-procs'}, ...procs));
}

function updateMig(g) {
  const r = state.cards.get(g.index);
  if (!r) return;
  const list = migCards(g);
  if (!r.migs) {
    r.migs = el('div', {class: 'migs', role: 'list', 'aria-label': `GPU ${g.index} MIG instances`});
    r.card.append(r.migs);
  }
  r.migs.hidden = !list.length;
  r.card.classList.toggle('has-mig', list.length > 0);
  if (typeof g.utilization_gpu !== 'number' && g.unavailable?.utilization_gpu === 'mig_mode') {
    r.util.textContent = 'N/A (MIG mode)';
    r.util.title = 'NVML reports no utilization for a GPU in MIG mode';
  } else {
    r.util.title = '';
  }
  r.migs.replaceChildren(...list.map(migCard));
}

function updateMigNote(doc) {
  const c = state.charts.get('utilization');
  if (!c) return;
  let note = c.el.querySelector('.chart-note');
  const text = migUtilNote(doc);
  if (!note) {
    note = el('p', {class: 'chart-note', role: 'note'});
    c.el.insertBefore(note, c.el.children[1] ?? null);
  }
  note.hidden = !text;
  note.textContent = text;
}

async function pollOnce() {
  const snap = await fetchJson('/api/v1/snapshot');
  const reconnected = !state.online;
  state.online = true;
  if (snap.status === 503 && snap.doc && snap.doc.up === false) {
    banner(`The NVIDIA driver is not available: ${snap.doc.error}. The agent keeps retrying; ` +
      'this page updates when it answers.');
    setStatus('driver missing', 'down');
    return;
  }
  if (snap.status !== 200 || !snap.doc) throw new Error(`snapshot: HTTP ${snap.status}`);
  banner('');
  if (reconnected && state.cards.size) {
    state.lastT = null;
    loadHistory(); // the agent may have restarted: what it wrote meanwhile is on disk
  }
  const before = state.lastT;
  onSnapshot(snap.doc);
  setStatus(`live · ${fmtClock(snap.doc.query_time_unix)}`, 'live');
  if (state.lastT === before) return; // the same sample again: nothing new to fetch
  const runsDue = reconnected || performance.now() - state.runsAt >= RUNS_REFRESH_MS;
  if (reconnected || performance.now() - state.usage.at >= USAGE_REFRESH_MS) loadUsage();
  const [procs, alerts] = await Promise.all([fetchJson('/api/v1/processes'),
    fetchJson('/api/v1/alerts'), runsDue ? loadRuns() : null]);
  if (procs.status === 200) {
    state.rows = processRows(procs.doc, procs.doc?.query_time_unix);
    state.hiddenRows = hiddenRows(procs.doc);
    renderTable();
  }
  if (alerts.status === 200) renderAlerts(alerts.doc);
}

let failures = 0;
async function loop() {
  let delay;
  try {
    await pollOnce();
    failures = 0;
    delay = (state.intervalS * 1000) / 2; // half the interval: a new sample shows promptly
  } catch {
    failures++;
    state.online = false;
    setStatus(`agent unreachable, retrying (${failures})…`, 'down');
    delay = Math.min(5000, 500 * 2 ** Math.min(failures, 4));
  }
  setTimeout(loop, delay);
}

buildRanges();
buildUsage();
buildTableHead();
renderTable();
loop();
