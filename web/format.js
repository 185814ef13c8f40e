// Formatting and data shaping for the dashboard: pure functions, no DOM, no fetch, so that
// tests/web/format.test.mjs runs them under node's test runner. app.js does the rest.
// tables.js is generated at build time from the C tables (src/runview/tables_gen.c).

import {GS_TABLES} from './tables.js';

const GIB = 1024 ** 3;

// Okabe & Ito's colour-blind-safe palette, black left out (it is the theme's foreground);
// the eighth colour is a grey that reads on both themes. GPU i gets PALETTE[i % 8].
export const PALETTE = ['#E69F00', '#56B4E9', '#009E73', '#F0E442', '#0072B2', '#D55E00',
  '#CC79A7', '#999999'];

export function gpuColor(index) {
  return PALETTE[((index % PALETTE.length) + PALETTE.length) % PALETTE.length];
}

const isNum = (v) => typeof v === 'number' && Number.isFinite(v);

// "N/A" for an absent reading (null, undefined, NaN): absent is not zero.
export const NA = 'N/A';

export function fmtBytes(b, digits = 1) {
  if (!isNum(b)) return NA;
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = Math.abs(b);
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${b < 0 ? '-' : ''}${i === 0 ? v.toFixed(0) : v.toFixed(digits)} ${units[i]}`;
}

// bytes to GiB as a number (charts plot GiB).
export const toGiB = (b) => (isNum(b) ? b / GIB : null);

export function fmtPercent(ratio, digits = 0) {
  return isNum(ratio) ? `${(ratio * 100).toFixed(digits)} %` : NA;
}

export function fmtWatts(w, digits = 0) {
  return isNum(w) ? `${w.toFixed(digits)} W` : NA;
}

export function fmtCelsius(c) {
  return isNum(c) ? `${Math.round(c)} °C` : NA;
}

export function fmtMHz(hz) {
  return isNum(hz) ? `${Math.round(hz / 1e6)} MHz` : NA;
}

export function fmtRate(bps) {
  if (!isNum(bps)) return NA;
  return `${fmtBytes(bps)}/s`;
}

// A duration in seconds as "3 d 4 h", "2 h 5 min", "4 min 10 s", "12 s".
export function fmtDuration(s) {
  if (!isNum(s) || s < 0) return NA;
  s = Math.floor(s);
  const d = Math.floor(s / 86400);
  const h = Math.floor((s % 86400) / 3600);
  const m = Math.floor((s % 3600) / 60);
  const sec = s % 60;
  if (d) return `${d} d ${h} h`;
  if (h) return `${h} h ${m} min`;
  if (m) return `${m} min ${sec} s`;
  return `${sec} s`;
}

// Local wall-clock time of a unix time, "HH:MM:SS" (24 h).
export function fmtClock(unix) {
  if (!isNum(unix)) return NA;
  const d = new Date(unix * 1000);
  const p = (n) => String(n).padStart(2, '0');
  return `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

// The charts: one per metric, every GPU a series. scale turns the API's base unit into what
// is plotted; fmt formats a plotted value for the axis and the hover legend.
export const CHARTS = [
  {id: 'utilization', metric: 'utilization_gpu', title: 'GPU utilization', unit: '%',
    scale: (v) => v * 100, fmt: (v) => `${v.toFixed(0)} %`, range: [0, 100]},
  {id: 'sm_active', metric: 'sm_active', title: 'SM activity (GPM)', unit: '%',
    scale: (v) => v * 100, fmt: (v) => `${v.toFixed(0)} %`, range: [0, 100], optional: true},
  {id: 'memory', metric: 'memory_used', title: 'Memory used', unit: 'GiB',
    scale: (v) => v / GIB, fmt: (v) => `${v.toFixed(1)} GiB`, step: 0.1},
  {id: 'temperature', metric: 'temperature_gpu', title: 'Temperature', unit: '°C',
    scale: (v) => v, fmt: (v) => `${v.toFixed(0)} °C`, step: 1},
  {id: 'power', metric: 'power_draw', title: 'Power', unit: 'W',
    scale: (v) => v, fmt: (v) => `${v.toFixed(0)} W`, step: 1},
  {id: 'clock', metric: 'clock_sm', title: 'SM clock', unit: 'MHz',
    scale: (v) => v / 1e6, fmt: (v) => `${v.toFixed(0)} MHz`, step: 1},
  {id: 'pcie', metric: 'pcie_rx', title: 'PCIe receive', unit: 'MB/s',
    scale: (v) => v / 1e6, fmt: (v) => `${v.toFixed(1)} MB/s`, step: 0.1},
];

// The x range of a history chart: the data's, widened to at least minSpan seconds ending at
// its last point, so that a chart with one point (an agent that just started) has a minute's
// time axis, not one of years.
export function timeRange(min, max, minSpan = 60) {
  if (!isNum(min) || !isNum(max)) return [min, max];
  return max - min >= minSpan ? [min, max] : [max - minSpan, max];
}

// The y range of a chart without a fixed one: the data's with 10 % room, at least 4 label
// steps wide (step: the smallest difference its labels show), never below 0 for data that is
// not, so a flat line does not get ticks finer than its labels.
export function valueRange(min, max, step) {
  if (!isNum(min) || !isNum(max)) return [min, max];
  const span = Math.max((max - min) * 1.2, 4 * (step || 0), Number.EPSILON);
  const mid = (min + max) / 2;
  let lo = mid - span / 2;
  let hi = mid + span / 2;
  if (min >= 0 && lo < 0) {
    hi -= lo;
    lo = 0;
  }
  return [lo, hi];
}

// Axis labels with repeats blanked: two ticks that format alike are labelled once.
export function tickLabels(vals, fmt) {
  let prev = null;
  return vals.map((v) => {
    const s = v == null ? '' : fmt(v);
    if (s === prev) return '';
    prev = s;
    return s;
  });
}

// The ranges the page offers, seconds back from now. 'live' updates with every sample.
export const RANGES = [
  {id: 'live', label: 'Live 15 min', seconds: 900},
  {id: '1h', label: '1 h', seconds: 3600},
  {id: '6h', label: '6 h', seconds: 6 * 3600},
  {id: '24h', label: '24 h', seconds: 86400},
  {id: '7d', label: '7 d', seconds: 7 * 86400},
  {id: '30d', label: '30 d', seconds: 30 * 86400},
];

// A range picked by date (the page's from/to fields): unix seconds, from before to, at most
// the 30 days rollups are kept; null otherwise.
export function customRange(from, to) {
  if (!isNum(from) || !isNum(to) || !(from < to) || to - from > 366 * 86400) return null;
  return {id: 'custom', label: 'custom', seconds: Math.ceil(to) - Math.floor(from),
    to: Math.ceil(to)};
}

// The /api/v1/history URL for one GPU, one metric and a range ending at now (unix seconds),
// or at the range's own end (a custom range).
// Live asks for 1 s buckets; longer ranges let the agent pick a step of at most 1000 points.
export function historyUrl(gpu, metric, range, now) {
  const to = Math.ceil(range.to ?? now);
  const from = to - range.seconds;
  const step = range.id === 'live' ? '&step=1' : '';
  return `/api/v1/history?gpu=${gpu}&metric=${encodeURIComponent(metric)}&from=${from}` +
    `&to=${to}${step}`;
}

// History answers for one metric, one per GPU (in series order; a missing one is null), to
// uPlot's columnar data: [times, gpu0 values, gpu1 values, ...], times the sorted union of all
// points' times, a GPU without a point at a time null there (a gap, not zero). Values are the
// bucket averages passed through scale.
export function toSeries(docs, scale = (v) => v) {
  const times = new Set();
  for (const d of docs)
    for (const p of d?.points ?? []) times.add(p[0]);
  const xs = [...times].sort((a, b) => a - b);
  const at = new Map(xs.map((t, i) => [t, i]));
  const cols = docs.map((d) => {
    const col = new Array(xs.length).fill(null);
    for (const p of d?.points ?? [])
      if (isNum(p[2])) col[at.get(p[0])] = scale(p[2]);
    return col;
  });
  return [xs, ...cols];
}

// Appends one sample (time t, one value per series, null where absent) to uPlot data in place
// and drops points older than t - keepSeconds. Returns the data. A t not after the last point
// is ignored (the same snapshot polled twice).
export function appendPoint(data, t, values, keepSeconds) {
  const xs = data[0];
  if (xs.length && t <= xs[xs.length - 1]) return data;
  xs.push(t);
  for (let i = 1; i < data.length; i++) data[i].push(values[i - 1] ?? null);
  let cut = 0;
  while (cut < xs.length && xs[cut] < t - keepSeconds) cut++;
  if (cut) for (const col of data) col.splice(0, cut);
  return data;
}

// The badges a GPU's card shows: [{kind, text}], kind 'warn', 'bad' or 'info' (other users'
// processes a filtered viewer does not see). Throttle reasons come
// by name from clocks_event_reasons ("idle" is not throttling). A PCIe link below its max is
// shown only under load (utilization >= 50 %), as the pcie_downshift alert rule does.
export function badges(g) {
  const out = [];
  if (g.lost) // what it fell off with (Xid 79) stays: the agent keeps the last one read
    return [{kind: 'bad', text: 'lost'}].concat(isNum(g.xid_last) && g.xid_last > 0 ?
      [{kind: 'bad', text: `Xid ${g.xid_last}`}] : []);
  for (const r of g.clocks_event_reasons ?? [])
    if (r !== 'idle') out.push({kind: 'warn', text: `throttled: ${r}`});
  const eccU = g.ecc_errors_uncorrected_volatile;
  const eccC = g.ecc_errors_corrected_volatile;
  if (isNum(eccU) && eccU > 0) out.push({kind: 'bad', text: `ECC uncorrected: ${eccU}`});
  if (isNum(eccC) && eccC > 0) out.push({kind: 'warn', text: `ECC corrected: ${eccC}`});
  if (isNum(g.xid_last) && g.xid_last > 0) out.push({kind: 'bad', text: `Xid ${g.xid_last}`});
  const gen = g.pcie_link_gen_current;
  const genMax = g.pcie_link_gen_max;
  const w = g.pcie_link_width_current;
  const wMax = g.pcie_link_width_max;
  // only under load: an idle link drops to Gen1 to save power, which is normal
  const loaded = isNum(g.utilization_gpu) && g.utilization_gpu >= 0.5;
  if (loaded && ((isNum(gen) && isNum(genMax) && gen < genMax) ||
      (isNum(w) && isNum(wMax) && w < wMax)))
    out.push({kind: 'warn', text: `PCIe Gen${gen ?? '?'} x${w ?? '?'} < Gen${genMax ?? '?'} ` +
      `x${wMax ?? '?'}`});
  const h = g.hidden_processes; // a filtered viewer: other users' processes, counted
  if (h && isNum(h.count) && h.count > 0)
    out.push({kind: 'info', text: `${h.count} process${h.count === 1 ? '' : 'es'} of other ` +
      'users, ' +
      `${isNum(h.gpu_memory) ? fmtBytes(h.gpu_memory) : NA}`});
  return out;
}

// /api/v1/processes entries to the table's rows: plain values to sort on, and text to show.
export function processRows(doc, now) {
  return (doc?.processes ?? []).map((p) => ({
    gpu: p.gpu,
    pid: p.pid,
    user: p.user ?? null,
    container: p.slurm_job != null ? `slurm ${p.slurm_job}`
      : p.pod?.name ? `pod ${p.pod.namespace ? `${p.pod.namespace}/` : ''}${p.pod.name}`
      : p.pod_uid ? `pod ${String(p.pod_uid).slice(0, 8)}`
        : p.container ? `${p.container.runtime} ${String(p.container.id).slice(0, 12)}` : null,
    gpu_memory: p.gpu_memory ?? null,
    sm: p.utilization_sm ?? null,
    cpu: p.cpu_ratio ?? null,
    rss: p.memory_rss ?? null,
    running: isNum(p.start_time) && isNum(now) ? Math.max(0, now - p.start_time) : null,
    command: p.command ?? p.name ?? null,
  }));
}

// Sorts rows by key, 'asc' or 'desc'; absent values (null) go last either way; ties keep the
// GPU, pid order. Returns a new array.
export function sortRows(rows, key, dir = 'asc') {
  const sign = dir === 'desc' ? -1 : 1;
  const cmp = (a, b) => {
    const x = a[key];
    const y = b[key];
    if (x == null || y == null) {
      if (x == null && y == null) return 0;
      return x == null ? 1 : -1;
    }
    if (typeof x === 'string' || typeof y === 'string')
      return sign * String(x).localeCompare(String(y));
    return sign * (x - y);
  };
  return [...rows].sort((a, b) => cmp(a, b) || a.gpu - b.gpu || a.pid - b.pid);
}

// An alert's one-line description: "GPU 0 · throttling: throttle > 0 (value 1)".
export function alertText(a) {
  const where = a.gpu == null ? 'node' : `GPU ${a.gpu}`;
  const v = isNum(a.value) ? +a.value.toPrecision(4) : NA;
  return `${where} · ${a.rule}: ${a.metric} ${a.op} ${a.threshold} (value ${v})`;
}

// Sparkline points for an SVG viewBox of width w and height h from values in 0..1 (nulls
// skipped): "x,y x,y ...".
export function sparkPoints(values, w, h) {
  const n = values.length;
  if (n < 2) return '';
  const pts = [];
  values.forEach((v, i) => {
    if (!isNum(v)) return;
    const x = (i / (n - 1)) * w;
    const y = h - Math.min(1, Math.max(0, v)) * h;
    pts.push(`${+x.toFixed(1)},${+y.toFixed(1)}`);
  });
  return pts.join(' ');
}

// A client-side token bucket, so that the page's bursts of /api/v1/history requests (one per
// chart and GPU) stay inside the agent's per-client rate limit (http_rate 50/s, http_burst 100
// by default) with room left for polling. take() spends a token and returns 0, or returns the
// milliseconds to wait before trying again. now in milliseconds.
export function tokenBucket(ratePerS, burst, now) {
  let tokens = burst;
  let t = now;
  return {
    take(at) {
      tokens = Math.min(burst, tokens + ((at - t) * ratePerS) / 1000);
      t = at;
      if (tokens >= 1) {
        tokens -= 1;
        return 0;
      }
      return Math.ceil(((1 - tokens) * 1000) / ratePerS);
    },
  };
}

// "used / total" in total's unit: "20.9 / 79.6 GiB"; N/A parts stay N/A.
export function fmtBytesPair(used, total) {
  if (!isNum(total)) return `${fmtBytes(used)} / ${NA}`;
  const t = fmtBytes(total);
  const unit = t.split(' ')[1];
  const div = 1024 ** ['B', 'KiB', 'MiB', 'GiB', 'TiB'].indexOf(unit);
  const u = isNum(used) ? (unit === 'B' ? used.toFixed(0) : (used / div).toFixed(1)) : NA;
  return `${u} / ${t}`;
}

// "586 / 700 W", "1980 / 2619 MHz": a reading and its limit or companion in one unit.
export function fmtPair(a, b, scale, unit) {
  const f = (v) => (isNum(v) ? `${Math.round(v * scale)}` : NA);
  return `${f(a)} / ${f(b)} ${unit}`;
}

// History answers for the GPUs of one chart are fetched one after the other while the agent
// keeps flushing, so a later answer may reach a little further. Cuts every answer at the
// earliest of their last points, so that all series end together; with dropLast (the live
// range, where live samples follow) that last bucket goes too, as it may be partly flushed.
// Returns new docs (null stays null).
export function trimToCommon(docs, dropLast) {
  const lasts = docs.filter((d) => d?.points?.length).map((d) => d.points[d.points.length - 1][0]);
  if (!lasts.length) return docs;
  const cut = Math.min(...lasts);
  return docs.map((d) => (d ? {...d, points: (d.points ?? []).filter((p) =>
    (dropLast ? p[0] < cut : p[0] <= cut))} : d));
}

// ---- the visibility policy (docs/security.md VISIBILITY POLICY) ----

// A non-admin viewer's /api/v1/processes carries "hidden_processes": per GPU, how many other
// users' processes the agent left out and their GPU memory summed (null when NVML could not
// size one). To rows of the process table, marked hidden (no pid, nothing to sort on).
export function hiddenRows(doc) {
  return (doc?.hidden_processes ?? []).filter((h) => isNum(h.count) && h.count > 0)
    .map((h) => ({gpu: h.gpu, hidden: true, count: h.count,
      gpu_memory: isNum(h.gpu_memory) ? h.gpu_memory : null}))
    .sort((a, b) => a.gpu - b.gpu);
}

// "3 processes of other users — 12.0 GiB" ("memory unknown" when not summed).
export function hiddenText(h) {
  const who = h.count === 1 ? '1 process of another user' : `${h.count} processes of other users`;
  return `${who} — ${isNum(h.gpu_memory) ? fmtBytes(h.gpu_memory) : 'memory unknown'}`;
}

// The table's order: the real rows sorted by key, then one hidden row per GPU, by GPU. Hidden
// rows stay at the bottom whatever the sort, as they have no pid, user or command to sort on.
export function tableRows(rows, hidden, key, dir) {
  return [...sortRows(rows, key, dir), ...(hidden ?? [])];
}

// Whether a snapshot was filtered for a non-admin viewer: only then do GPUs carry
// "hidden_processes" (admins get the document unchanged).
export function isFiltered(snapshot) {
  return (snapshot?.gpus ?? []).some((g) => g.hidden_processes != null);
}

// The note under the process table for a filtered viewer, '' for an admin. The snapshot does
// not say how many GPUs the node has, so the note names no count.
export function visibilityNote(snapshot) {
  if (!isFiltered(snapshot)) return '';
  const n = (snapshot.gpus ?? []).reduce((s, g) => s + (g.hidden_processes?.count ?? 0), 0);
  return 'You see this node as a viewer, not an admin (docs/security.md, VISIBILITY ' +
    `POLICY): ${n ? `${n} process${n === 1 ? '' : 'es'} of other users ` +
    `${n === 1 ? 'is' : 'are'} only counted, per GPU` : 'other users\' processes would be ' +
    'only counted, per GPU'}. GPU memory used includes theirs. With gpu_visibility = used ` +
    'the agent shows only the GPUs you use, so this page may list fewer GPUs than the node has.';
}

// ---- training runs (/api/v1/runs, /api/v1/runs/ID; docs/report.md) ----

// A 0..1 ratio as "25.0 %"; a 0..100 percent as "68 %".
export const fmtRatio = (r) => (isNum(r) ? `${(r * 100).toFixed(1)} %` : NA);
export const fmtPct = (p) => (isNum(p) ? `${p.toFixed(0)} %` : NA);

// /api/v1/runs entries to the Runs list's rows. Duration: end - start, or now - start while
// the run goes on (end null).
export function runRows(doc, now) {
  return (doc?.runs ?? []).map((r) => {
    const end = isNum(r.end) ? r.end : r.state === 'running' && isNum(now) ? now : null;
    return {
      id: r.id,
      name: r.name || `run ${r.id}`,
      user: r.user ?? (isNum(r.uid) ? `uid ${r.uid}` : NA),
      // the agent's hang rule: no step for N x the run's p95 step time (docs/api.md); an
      // interrupted run (its sender went away without an end, or the agent restarted) waits
      // for its sender while its end is null (docs/agent.md, RESUMING A RUN)
      state: r.stalled === true ?
        `stalled (no step for ${fmtDuration(r.stalled_seconds)})` :
        r.state === 'interrupted' && r.end == null ? 'interrupted (waiting for its sender)' :
          r.state ?? NA,
      stalled: r.stalled === true,
      interrupted: r.stalled !== true && r.state === 'interrupted',
      start: r.start ?? null,
      duration: isNum(r.start) && end != null ? Math.max(0, end - r.start) : null,
      steps: r.steps ?? null,
      ratios: `data ${fmtRatio(r.data_loading_time_ratio)} · comm ` +
        `${fmtRatio(r.communication_time_ratio)} · GPU ${fmtPct(r.gpu_avg_utilization_percent ??
          r.gpu_busy_estimate_percent)}`,
      findings: r.findings ?? [],
      tags: tagsText(r.tags),
    };
  });
}

// The Runs section's note under the list: how many runs the policy left out, or why empty.
export function runsNote(doc, status) {
  if (status === 404) { // the agent says why: socket = off, or the socket could not be opened
    const why = typeof doc?.error === 'string' && doc.error ? doc.error : '';
    return why ? why.charAt(0).toUpperCase() + why.slice(1) + '.' :
      'Runs are off on this agent: it keeps no training runs.';
  }
  const hidden = isNum(doc?.hidden) ? doc.hidden : 0;
  const other = hidden ? ` ${hidden} run${hidden === 1 ? '' : 's'} of other users ` +
    `${hidden === 1 ? 'is' : 'are'} not shown (visibility policy).` : '';
  if (!(doc?.runs ?? []).length)
    return 'Runs appear here when a training process using the gpuscope Python package runs ' +
      `while the agent is up: see docs/python.md.${other}`;
  return other.trim();
}

// The version-1 phases of a step record, from the C table (gs_run.h GS_PHASES).
const PHASES = GS_TABLES.phases.filter((p) => p.version === 1).map((p) => p.name);
const ms = (v) => (isNum(v) ? v.toFixed(2) : NA);

// A run report (docs/report.md) to what the run's detail shows: headline figures [label,
// text], the phases table, one row per GPU, the findings with their advice.
export function runSummary(rep) {
  const run = rep?.run ?? {};
  const headline = [
    ['State', `${run.state ?? NA}${run.interrupted ? ' (interrupted)' : ''}`],
    ['Runtime', fmtDuration(rep?.train_runtime)],
    ['Steps', `${rep?.steps ?? NA} (${rep?.ranks ?? NA} rank${rep?.ranks === 1 ? '' : 's'})`],
    ['Throughput', isNum(rep?.train_samples_per_second)
      ? `${rep.train_samples_per_second.toFixed(2)} samples/s` : NA],
    ['Tokens', isNum(rep?.train_tokens_per_second)
      ? `${rep.train_tokens_per_second.toFixed(1)} tokens/s` +
        (isNum(rep?.tokens_per_second_per_gpu)
          ? ` (${rep.tokens_per_second_per_gpu.toFixed(1)} per GPU)` : '') : NA],
    ['MFU', isNum(rep?.mfu) ? `${(100 * rep.mfu).toFixed(2)} %` +
      ` (${rep.peak_flops_precision ?? NA} peak of ${rep.peak_flops_gpu ?? NA})`
      : (rep?.mfu_null_reason ?? NA)],
    ['Data loading', fmtRatio(rep?.data_loading_time_ratio)],
    ['Communication', fmtRatio(rep?.communication_time_ratio)],
    ['GPU utilization', `avg ${fmtPct(rep?.gpu_avg_utilization_percent)}, max ` +
      `${fmtPct(rep?.gpu_max_utilization_percent)}${rep?.gpu_utilization_source
        ? ` (${rep.gpu_utilization_source})` : ''}`],
    ['GPU busy (estimate)', fmtPct(rep?.gpu_busy_estimate_percent)],
    ['Peak memory', isNum(rep?.gpu_peak_memory_allocated_gb)
      ? `${rep.gpu_peak_memory_allocated_gb.toFixed(2)} GiB` : NA],
  ];
  const phases = PHASES.filter((p) => (rep?.phases?.[p]?.count ?? 0) > 0).map((p) => {
    const x = rep.phases[p];
    return [p, ms(x.mean_ms), ms(x.p50_ms), ms(x.p95_ms),
      isNum(x.total_ms) ? (x.total_ms / 1000).toFixed(3) : NA, String(x.count)];
  });
  const gpus = (rep?.gpus ?? []).map((g) => [String(g.index), g.name ?? NA,
    fmtPct(g.utilization_avg_percent), fmtPct(g.utilization_max_percent),
    isNum(g.memory_peak_bytes) ? fmtBytes(g.memory_peak_bytes) : NA,
    isNum(g.energy_joules) ? `${Math.round(g.energy_joules)} J` : NA,
    isNum(g.throttled_seconds_total) ? `${g.throttled_seconds_total.toFixed(1)} s` : NA]);
  const findings = (rep?.findings ?? []).map((f) => ({id: f.id, severity: f.severity ?? 'info',
    title: f.title ?? f.id, advice: Array.isArray(f.advice) ? f.advice : []}));
  return {headline, phases, gpus, findings};
}

// A run report's per-rank table (docs/report.md, PER RANK) for the run detail: rows [rank,
// GPU, steps, step p50, p95, data, communication (mean ms), samples/s, tokens/s, MFU] and, with
// two ranks or
// more, a line naming the rank that computes longest against the other ranks, and whether it
// is a straggler (docs/report.md, STRAGGLER).
export function runRanks(rep) {
  const rows = (rep?.per_rank ?? []).map((r) => [String(r.rank ?? NA),
    isNum(r.device) ? String(r.device) : NA, isNum(r.steps) ? String(r.steps) : NA,
    ms(r.step_p50_ms), ms(r.step_p95_ms), ms(r.mean_ms?.data), ms(r.mean_ms?.communication),
    isNum(r.samples_per_second) ? r.samples_per_second.toFixed(1) : NA,
    isNum(r.tokens_per_second) ? r.tokens_per_second.toFixed(1) : NA,
    isNum(r.mfu) ? `${(100 * r.mfu).toFixed(2)} %` : NA]);
  const s = rep?.slowest_rank;
  const slowest = s && isNum(s.busy_p50_ms) ? `Slowest: rank ${s.rank} computes ` +
    `${ms(s.busy_p50_ms)} ms per step against the other ranks' ${ms(s.others_busy_p50_ms)} ms` +
    `${isNum(s.slower_by_ratio) ? ` (${(s.slower_by_ratio * 100).toFixed(0)} % longer)` : ''}` +
    `${isNum(s.device) ? ` on GPU ${s.device}` : ''}` +
    `${s.straggler ? ': a straggler, the others wait for it' +
      (isNum(s.others_comm_wait_p50_ms) ? ` ${ms(s.others_comm_wait_p50_ms)} ms/step` : '')
      : ' (not a straggler)'}.` : null;
  return {rows, slowest};
}

// The link from a run's job to the Grafana job dashboard (deploy/grafana/training-job.json,
// uid gpuscope-training-job, variable job = the train_job label), or null: only an http(s)
// base URL makes a link, so a configured value can never run script.
export function grafanaJobUrl(base, job) {
  if (typeof base !== 'string' || typeof job !== 'string' || !job) return null;
  let u;
  try {
    u = new URL(base);
  } catch {
    return null;
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') return null;
  u.pathname = `${u.pathname.replace(/\/+$/, '')}/d/gpuscope-training-job`;
  u.search = new URLSearchParams({'var-job': job}).toString();
  return u.toString();
}

// `gpuscope compare`'s fields (docs/compare.md), from the C table (src/runview/
// compare_fields.h): [report key, format, good direction: -1 down is better, +1 up, 0 neither].
const fieldFormat = (unit, digits) => (v) => (digits < 0 ? String(v)
  : unit ? `${v.toFixed(digits)} ${unit}` : v.toFixed(digits));
const COMPARE_FIELDS = GS_TABLES.compare_fields.map((f) => [f.name,
  fieldFormat(f.unit, f.digits), f.larger_is_better]);

function changeCells(a, b, fmt, good) {
  if (!isNum(a) || !isNum(b)) return ['', '', ''];
  const d = b - a;
  const sign = d > 0 ? '+' : d < 0 ? '-' : '+';
  const pct = a !== 0 ? `${sign}${Math.abs(d / Math.abs(a) * 100).toFixed(1)} %` : '';
  const cls = !good || d === 0 ? '' : Math.sign(d) === good ? 'better' : 'worse';
  return [`${sign}${fmt(Math.abs(d))}`, pct, cls];
}

const factText = (v) => (v === undefined ? '-' : v === null ? 'null' : String(v));

// Two run reports side by side, as `gpuscope compare A B` prints them: fields and phases
// ([label, A, B, change, change %, class better|worse|'']; null on one side: no change), the
// settings that differ ([key, A, B] from the reports' facts) and the findings ([id, A's
// severity, B's, verdict]: went away, appeared, in both).
export function compareReports(a, b) {
  const fields = [];
  for (const [key, fmt, good] of COMPARE_FIELDS) {
    const x = a?.[key], y = b?.[key];
    if (!isNum(x) && !isNum(y)) continue;
    fields.push([key, isNum(x) ? fmt(x) : NA, isNum(y) ? fmt(y) : NA,
      ...changeCells(x, y, fmt, good)]);
  }
  const phases = PHASES.filter((p) => isNum(a?.phases?.[p]?.mean_ms) ||
    isNum(b?.phases?.[p]?.mean_ms)).map((p) => {
    const x = a?.phases?.[p]?.mean_ms, y = b?.phases?.[p]?.mean_ms;
    const f = (v) => `${v.toFixed(2)} ms`;
    return [p, isNum(x) ? f(x) : NA, isNum(y) ? f(y) : NA, ...changeCells(x, y, f, -1)];
  });
  const fa = a?.facts ?? {}, fb = b?.facts ?? {};
  const facts = [...new Set([...Object.keys(fa), ...Object.keys(fb)])].sort()
    .filter((k) => JSON.stringify(fa[k]) !== JSON.stringify(fb[k]))
    .map((k) => [k, factText(fa[k]), factText(fb[k])]);
  const sev = (rep) => new Map((rep?.findings ?? []).map((f) => [f.id, f.severity ?? 'info']));
  const sa = sev(a), sb = sev(b);
  const findings = [...new Set([...sa.keys(), ...sb.keys()])].map((id) => [id,
    sa.get(id) ?? '-', sb.get(id) ?? '-',
    sa.has(id) && sb.has(id) ? 'in both' : sa.has(id) ? 'went away' : 'appeared']);
  return {fields, phases, facts, findings};
}

// The GPU card's NVLink row, short enough for a card: "18/18 · 73.4 GiB/s" (links up / links,
// then TX + RX data throughput), then "· 163 err" when the links counted data-link errors; the
// title says it in full. null for a GPU without NVLink (a PCIe card): its card has no NVLink
// row. down: a link is not active.
export function nvlinkText(g) {
  if (!isNum(g?.nvlink_links) || g.nvlink_links <= 0) return null;
  const up = isNum(g.nvlink_links_active) ? g.nvlink_links_active : NA;
  const rate = isNum(g.nvlink_tx) && isNum(g.nvlink_rx);
  const keys = [['replay', 'nvlink_replay_errors'], ['recovery', 'nvlink_recovery_errors'],
    ['CRC flit', 'nvlink_crc_flit_errors'], ['CRC data', 'nvlink_crc_data_errors']];
  const errs = keys.filter(([, k]) => isNum(g[k]));
  const n = errs.reduce((a, [, k]) => a + g[k], 0);
  let text = `${up}/${g.nvlink_links}`;
  if (rate) text += ` · ${fmtRate(g.nvlink_tx + g.nvlink_rx)}`;
  if (n > 0) text += ` · ${n} err`;
  let title = `NVLink: ${up} of ${g.nvlink_links} links active`;
  if (isNum(g.nvlink_link_speed)) title += `, ${fmtRate(g.nvlink_link_speed)} each way per link`;
  if (rate) title += `; tx ${fmtRate(g.nvlink_tx)}, rx ${fmtRate(g.nvlink_rx)}`;
  if (errs.length) title += `; errors: ${errs.map(([l, k]) => `${l} ${g[k]}`).join(', ')}`;
  return {text, title, down: isNum(g.nvlink_links_active) && g.nvlink_links_active < g.nvlink_links,
    errors: n};
}

// ---- MIG devices ----

// The profile of a MIG device entry: its "profile", else what follows "MIG " in its name.
function migProfile(m) {
  if (typeof m.profile === 'string' && m.profile) return m.profile;
  const n = typeof m.name === 'string' ? m.name.lastIndexOf('MIG ') : -1;
  return n >= 0 ? m.name.slice(n + 4) : null;
}

// " · slices 4–7" (" · slice 0") of a GPU instance's placement in the GPU's memory slices; ''
// when it was not read (NVML answers it to root only).
function migSlices(p) {
  if (!p || !isNum(p.start) || !isNum(p.size) || p.size < 1) return '';
  return p.size === 1 ? ` · slice ${p.start}` : ` · slices ${p.start}–${p.start + p.size - 1}`;
}

// A GPU's MIG devices (snapshot document: mig_devices, processes) as the cards under its
// card: title "MIG 3g.40gb", the instance ids, memory used / total and the fraction for the
// bar, graphics activity (GPM) when the agent read it, and the instance's processes (matched
// by gi_id and ci_id), largest first. [] for a GPU without MIG devices or a lost one.
export function migCards(g) {
  if (!g || g.lost || !Array.isArray(g.mig_devices)) return [];
  const procs = Array.isArray(g.processes) ? g.processes : [];
  return g.mig_devices.map((m) => {
    const used = isNum(m.memory_used) ? m.memory_used : null;
    const total = isNum(m.memory_total) ? m.memory_total : null;
    const profile = migProfile(m);
    const list = procs.filter((p) => p.gi_id === m.gi_id && p.ci_id === m.ci_id)
      .sort((a, b) => (b.gpu_memory ?? -1) - (a.gpu_memory ?? -1) || a.pid - b.pid)
      .map((p) => ({pid: p.pid, mem: isNum(p.gpu_memory) ? p.gpu_memory : null,
        text: `${p.name ?? p.command ?? 'process'} ${p.pid}${p.user ? ` (${p.user})` : ''} · ` +
          `${fmtBytes(p.gpu_memory)}`}));
    return {
      key: `${m.gi_id}/${m.ci_id}`,
      title: `MIG ${profile ?? NA}`,
      profile,
      ids: `GI ${m.gi_id ?? NA} · CI ${m.ci_id ?? NA}${isNum(m.sm_count) ? ` · ${m.sm_count} SMs` : ''}` +
        migSlices(m.placement),
      uuid: m.uuid ?? null,
      mem: fmtBytesPair(used, total),
      ratio: used != null && total != null && total > 0 ? Math.min(1, used / total) : null,
      gr: isNum(m.graphics_active) ? m.graphics_active : null,
      procs: list,
    };
  });
}

// What the utilization chart says of GPUs in MIG mode (the snapshot says utilization_gpu is
// unavailable for "mig_mode"), '' when there are none.
export function migUtilNote(doc) {
  const gs = (doc?.gpus ?? []).filter((g) => !isNum(g.utilization_gpu) &&
    g.unavailable?.utilization_gpu === 'mig_mode');
  if (!gs.length) return '';
  return `${gs.map((g) => `GPU ${g.index}`).join(', ')}: utilization not available in MIG ` +
    'mode (NVML reports none for a GPU split into instances); the MIG cards show each ' +
    'instance\'s memory and graphics activity.';
}

// ---- training curves (/api/v1/runs/ID/logs) ----

// The logged records of a run (the logs pages' "logs": {step, t, rank, values}) as chart
// columns: x = step when every record has one (else its time, unix s: time = true), then one
// column per key of `keys` that some record has, null where a record lacks it; records in
// x order (a stable sort: the agent keeps arrival order). Records without any of the keys
// are left out, and so are those of other ranks than the lowest that logged (every rank of a
// DDP job may log the same values: the HF Trainer calls on_log on each).
export function logSeries(logs, keys = ['loss', 'learning_rate']) {
  const some = (Array.isArray(logs) ? logs : []).filter((r) => r && typeof r.values === 'object' &&
    r.values !== null && keys.some((k) => isNum(r.values[k])));
  const low = some.reduce((m, r) => (isNum(r.rank) && (m === null || r.rank < m) ? r.rank : m),
    null);
  const recs = some.filter((r) => !isNum(r.rank) || r.rank === low);
  const byStep = recs.length > 0 && recs.every((r) => isNum(r.step));
  const xOf = (r) => (byStep ? r.step : r.t);
  const rows = recs.filter((r) => isNum(xOf(r))).map((r, i) => ({r, i}))
    .sort((a, b) => xOf(a.r) - xOf(b.r) || a.i - b.i).map((x) => x.r);
  const present = keys.filter((k) => rows.some((r) => isNum(r.values[k])));
  return {
    time: !byStep,
    x: rows.map(xOf),
    series: present.map((k) => ({key: k, values: rows.map((r) => (isNum(r.values[k]) ?
      r.values[k] : null))})),
  };
}

// A run's tags ({"team": "nlp"}) as one line, "team=nlp · try=3"; '' when none.
export function tagsText(tags) {
  if (!tags || typeof tags !== 'object') return '';
  return Object.entries(tags).filter(([, v]) => typeof v === 'string')
    .map(([k, v]) => `${k}=${v}`).join(' · ');
}

// ---- GPU usage (/api/v1/usage, docs/api.md; the Usage section, docs/dashboard.md) ----

// The Usage section's time ranges: the last hour, day, week, 30 days (the rollups' retention).
export const USAGE_RANGES = [
  {label: '1 h', seconds: 3600},
  {label: '24 h', seconds: 86400},
  {label: '7 d', seconds: 7 * 86400},
  {label: '30 d', seconds: 30 * 86400},
];
// At least this share of the held time idle (busy under 5 %): the row is highlighted.
export const USAGE_IDLE_SHARE = 0.5;

export function usageUrl(by, seconds, now) {
  return `/api/v1/usage?by=${encodeURIComponent(by)}&from=${Math.floor(now - seconds)}` +
    `&to=${Math.ceil(now)}`;
}

const hours = (h) => (isNum(h) ? (h < 10 ? h.toFixed(2) : h.toFixed(1)) : NA);

// /api/v1/usage rows to the Usage table's: the key (a job's rows keyed by job, with its user),
// GPU-hours held and busy share, idle-held hours and their share of the held time (idle: at
// least USAGE_IDLE_SHARE), peak memory, energy, cost (with the agent's currency).
export function usageRows(doc) {
  const cur = typeof doc?.currency === 'string' && doc.currency ? ` ${doc.currency}` : '';
  return (doc?.rows ?? []).map((r) => {
    const idleShare = isNum(r.idle_held_hours) && isNum(r.held_gpu_hours) &&
      r.held_gpu_hours > 0 ? r.idle_held_hours / r.held_gpu_hours : null;
    return {
      key: r.key === '' ? (doc?.by === 'job' ? '(no job)' : '(none)') : String(r.key ?? NA),
      user: r.user ?? (isNum(r.uid) ? `uid ${r.uid}` : '—'),
      held: hours(r.held_gpu_hours),
      busy: fmtPercent(r.busy_share),
      idleHeld: isNum(idleShare) ? `${hours(r.idle_held_hours)} (${fmtPercent(idleShare)})` : NA,
      idle: isNum(idleShare) && idleShare >= USAGE_IDLE_SHARE,
      peak: fmtBytes(r.peak_memory_bytes),
      energy: isNum(r.energy_kwh) ? `${r.energy_kwh.toFixed(r.energy_kwh < 10 ? 2 : 1)} kWh` : NA,
      cost: isNum(r.cost) ? `${r.cost.toFixed(2)}${cur}` : '—',
    };
  });
}

// The note under the Usage table: why it is empty, or the rows left out.
export function usageNote(doc, status) {
  if (status !== 200)
    return typeof doc?.error === 'string' && doc.error ?
      `Usage: ${doc.error}` : `Usage is not available (HTTP ${status}).`;
  const dropped = isNum(doc?.groups_dropped) && doc.groups_dropped > 0 ?
    ` ${doc.groups_dropped} more rows not shown.` : '';
  if (!(doc?.rows ?? []).length)
    return 'No GPU was held in this range (or none by your processes: the agent shows you ' +
      `your own usage unless you are an admin).${dropped}`;
  return dropped.trim();
}
