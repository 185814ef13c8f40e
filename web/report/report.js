// The run report page (gpuscope report, gpuscope compare --html): reads the JSON document in
// <script id="gs-data"> (src/runview/page.c writes it; docs/report-html.md describes it) and
// draws it with uPlot. Everything is built with DOM calls and textContent: run names, commands
// and findings come from the run and are never parsed as HTML. Nothing is fetched.
//
// For tests and other tools: window.gsReport = {ready, kind, charts: [{id, points, series}],
// errors}; each chart's element carries data-points (its x values) and data-series.
(function () {
  'use strict';
  const state = {ready: false, kind: null, charts: [], errors: []};
  window.gsReport = state;

  // ---- small DOM helpers ----
  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function add(parent, tag, cls, text) {
    const e = el(tag, cls, text);
    parent.appendChild(e);
    return e;
  }
  function section(title, id) {
    const s = el('section');
    if (id) s.id = id;
    add(s, 'h2', null, title);
    document.getElementById('main').appendChild(s);
    return s;
  }
  const isNum = (v) => typeof v === 'number' && isFinite(v);
  const isObj = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);

  // ---- number formatting ----
  function fmtNum(v, digits) {
    if (!isNum(v)) return v === null || v === undefined ? 'n/a' : String(v);
    const a = Math.abs(v);
    if (digits === undefined) digits = a >= 1000 ? 0 : a >= 100 ? 1 : a >= 10 ? 2 : a >= 1 ? 3 : 4;
    return v.toLocaleString('en-US', {maximumFractionDigits: digits, minimumFractionDigits: 0});
  }
  function fmtTime(t) {
    if (!isNum(t)) return 'n/a';
    const d = new Date(t * 1000);
    return d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC');
  }
  function fmtDur(s) {
    if (!isNum(s)) return 'n/a';
    if (s < 120) return fmtNum(s, s < 10 ? 2 : 1) + ' s';
    if (s < 7200) return Math.floor(s / 60) + ' min ' + Math.round(s % 60) + ' s';
    return Math.floor(s / 3600) + ' h ' + Math.round((s % 3600) / 60) + ' min';
  }
  // The unit a report field's name implies (docs/report.md CONVENTIONS).
  function fmtField(name, v) {
    if (!isNum(v)) return v === null || v === undefined ? 'n/a' : typeof v === 'boolean' ? (v ? 'true' : 'false') : String(v);
    if (name === 'mfu' || name === 'hfu') return fmtNum(100 * v, 100 * v >= 0.1 ? 2 : 4) + ' %';
    if (name === 'train_runtime' || /_seconds$/.test(name)) return fmtDur(v);
    if (/_percent$/.test(name)) return fmtNum(v, 1) + ' %';
    if (/_ratio$/.test(name)) return fmtNum(v, 3);
    if (/_gb$/.test(name)) return fmtNum(v, 2) + ' GiB';
    if (/_ms$/.test(name)) return fmtNum(v, 2) + ' ms';
    if (/_joules$/.test(name)) return fmtNum(v, 0) + ' J';
    if (/_bytes$/.test(name)) return fmtNum(v / 1073741824, 2) + ' GiB';
    if (/_per_second$/.test(name)) return fmtNum(v, 3) + ' /s';
    if (name === 'tokens_per_second_per_gpu') return fmtNum(v, 1) + ' /s';
    return fmtNum(v);
  }
  function scalarText(v) {
    if (v === null || v === undefined) return 'n/a';
    if (typeof v === 'boolean') return v ? 'true' : 'false';
    if (isNum(v)) return fmtNum(v);
    return String(v);
  }

  // ---- generic rendering of a JSON value (evidence, per-rank rows, stacks, profile) ----
  function renderValue(v, depth) {
    depth = depth || 0;
    if (!isObj(v) && !Array.isArray(v)) return el('span', null, scalarText(v));
    if (Array.isArray(v)) {
      if (v.length && v.every(isObj)) return renderTable(v, depth);
      return el('span', 'mono', v.map(scalarText).join(', '));
    }
    const dl = el('dl', 'kv');
    for (const [k, x] of Object.entries(v)) {
      add(dl, 'dt', null, k);
      const dd = add(dl, 'dd');
      if (isObj(x) || Array.isArray(x)) dd.appendChild(depth > 3 ? el('span', 'mono', JSON.stringify(x)) : renderValue(x, depth + 1));
      else dd.textContent = isNum(x) ? fmtField(k, x) : scalarText(x);
    }
    return dl;
  }
  // An array of objects as a table; nested objects one level deep become columns "a.b".
  function renderTable(rows, depth, max) {
    const cols = [];
    const seen = new Set();
    const flat = rows.slice(0, max || 200).map((r) => {
      const o = {};
      for (const [k, x] of Object.entries(r)) {
        if (isObj(x) && Object.values(x).every((y) => !isObj(y) && !Array.isArray(y))) {
          for (const [k2, y] of Object.entries(x)) o[k + '.' + k2] = y;
        } else o[k] = x;
      }
      for (const k of Object.keys(o)) if (!seen.has(k)) { seen.add(k); cols.push(k); }
      return o;
    });
    const t = el('table');
    const hr = add(add(t, 'thead'), 'tr');
    for (const c of cols) add(hr, 'th', null, c);
    const tb = add(t, 'tbody');
    for (const o of flat) {
      const tr = add(tb, 'tr');
      for (const c of cols) {
        const x = o[c];
        const td = add(tr, 'td', isNum(x) ? 'num' : null);
        if (isObj(x) || Array.isArray(x)) td.appendChild(renderValue(x, (depth || 0) + 1));
        else td.textContent = isNum(x) ? fmtField(c.split('.').pop(), x) : scalarText(x);
      }
    }
    if (rows.length > flat.length) {
      const tr = add(tb, 'tr');
      const td = add(tr, 'td', 'note', (rows.length - flat.length) + ' more rows not shown');
      td.colSpan = cols.length || 1;
    }
    return t;
  }

  // ---- charts ----
  const COLORS = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b', '#e377c2',
    '#7f7f7f', '#bcbd22', '#17becf'];
  function chartWidth(parent) {
    return Math.max(300, Math.min(1140, (parent.clientWidth || 1100) - 4));
  }
  // markers: [{t, label, color}] drawn as vertical lines (step starts, run start/end).
  function markerHook(markers) {
    return (u) => {
      if (!markers || !markers.length) return;
      const ctx = u.ctx;
      const {left, top, width, height} = u.bbox;
      ctx.save();
      ctx.beginPath();
      ctx.rect(left, top, width, height);
      ctx.clip();
      for (const m of markers) {
        const x = Math.round(u.valToPos(m.t, 'x', true));
        if (x < left || x > left + width) continue;
        ctx.strokeStyle = m.color || 'rgba(120,120,120,0.25)';
        ctx.lineWidth = m.width || 1;
        ctx.setLineDash(m.dash || []);
        ctx.beginPath();
        ctx.moveTo(x + 0.5, top);
        ctx.lineTo(x + 0.5, top + height);
        ctx.stroke();
      }
      ctx.restore();
    };
  }
  function addChart(parent, id, caption, opts, data) {
    const box = add(parent, 'div', 'chart');
    box.id = id;
    add(box, 'p', 'cap', caption);
    const points = data[0].length;
    box.dataset.points = String(points);
    box.dataset.series = String(data.length - 1);
    state.charts.push({id, points, series: data.length - 1});
    if (!points) {
      add(box, 'p', 'note', 'no data');
      return null;
    }
    opts.width = chartWidth(box);
    opts.height = opts.height || 220;
    opts.legend = opts.legend || {live: true};
    return new uPlot(opts, data, box);
  }
  const tsAxis = {stroke: 'currentColor', grid: {stroke: 'rgba(128,128,128,0.15)'}};
  function yAxis(label, fmt, scale) {
    const a = {label, stroke: 'currentColor', grid: {stroke: 'rgba(128,128,128,0.15)'},
      size: 60, values: (u, vals) => vals.map((v) => (fmt ? fmt(v) : fmtNum(v)))};
    if (scale) a.scale = scale;
    return a;
  }

  // ---- the report ----
  const HEADLINE = [
    ['train_runtime', 'runtime'],
    ['train_samples_per_second', 'samples / s'],
    ['train_steps_per_second', 'steps / s'],
    ['gpu_peak_memory_allocated_gb', 'GPU peak memory'],
    ['gpu_avg_utilization_percent', 'GPU utilization avg'],
    ['gpu_max_utilization_percent', 'GPU utilization max'],
    ['data_loading_time_ratio', 'data loading time ratio'],
    ['communication_time_ratio', 'communication time ratio'],
  ];
  // the parts of a step's wall time, from the C table (gs_run.h GS_PHASES; GS_TABLES is the
  // script scripts/embed-report.py inlines before this one)
  const STACK = GS_TABLES.phases.filter((p) => p.wall).map((p) => p.name);

  function renderHeadline(rep) {
    const s = section('Headline', 'headline');
    const cards = add(s, 'div', 'cards');
    for (const [k, label] of HEADLINE) {
      const c = add(cards, 'div', 'card');
      c.dataset.field = k;
      add(c, 'div', 'k', label);
      add(c, 'div', 'v', fmtField(k, rep[k]));
      let sub = k;
      if (k === 'gpu_avg_utilization_percent' && rep.gpu_utilization_source) sub += ' (' + rep.gpu_utilization_source + ')';
      if (k === 'gpu_peak_memory_allocated_gb' && rep.gpu_peak_memory_source) sub += ' (' + rep.gpu_peak_memory_source + ')';
      add(c, 'div', 's', sub);
    }
    // tokens/s and MFU (docs/report.md, TOKENS AND MFU): the figures, or why MFU is null
    if (isNum(rep.train_tokens_per_second) || rep.mfu_null_reason) {
      const eff = add(s, 'div', 'cards');
      const card = (k, label, sub) => {
        const c = add(eff, 'div', 'card');
        c.dataset.field = k;
        add(c, 'div', 'k', label);
        add(c, 'div', 'v', fmtField(k, rep[k]));
        add(c, 'div', 's', sub);
      };
      card('train_tokens_per_second', 'tokens / s', 'train_tokens_per_second (' +
        fmtNum(rep.train_tokens) + ' tokens)');
      card('tokens_per_second_per_gpu', 'tokens / s per GPU', 'tokens_per_second_per_gpu');
      card('mfu', 'MFU', isNum(rep.mfu)
        ? (rep.model_flops_formula || '') + ' · ' + fmtNum(rep.model_flops_per_token) +
          ' FLOPs/token · peak ' + fmtNum(rep.peak_flops / 1e12, 1) + ' TFLOP/s ' +
          (rep.peak_flops_precision || '') + ' ' + (rep.peak_flops_gpu || '')
        : (rep.mfu_null_reason || 'n/a'));
      if (isNum(rep.hfu)) card('hfu', 'HFU', 'hfu (activation recomputation on)');
    }
    const more = [];
    for (const k of ['steps', 'ranks', 'energy_joules', 'throttled_seconds', 'other_time_ratio',
      'gpu_busy_estimate_percent', 'step_busy_estimate_percent']) {
      if (rep[k] !== undefined && rep[k] !== null) more.push(k + ' ' + fmtField(k, rep[k]));
    }
    if (more.length) add(s, 'p', 'muted', more.join(' · '));
  }

  function renderRunInfo(doc, rep) {
    const run = rep.run || {};
    const name = run.name || doc.label || 'run';
    document.getElementById('title').textContent = name;
    document.title = name + ' — gpuscope report';
    const bits = [];
    if (run.source) bits.push(run.source);
    if (run.hostname) bits.push(run.hostname);
    if (isNum(run.start_time)) bits.push(fmtTime(run.start_time));
    if (isNum(run.start_time) && isNum(run.end_time)) bits.push(fmtDur(run.end_time - run.start_time));
    document.getElementById('subtitle').textContent = bits.join(' · ');
    const s = section('Run', 'run');
    const info = {};
    if (doc.origin) info.from = doc.origin;
    for (const k of ['command', 'framework', 'world_size', 'exit_code', 'pid', 'uid', 'tags',
      'start_time', 'end_time', 'step_records', 'dropped_records', 'records_dropped', 'train_loss',
      'id', 'state', 'user', 'interrupted']) {
      if (run[k] === undefined || run[k] === null) continue;
      info[k] = /_time$/.test(k) ? fmtTime(run[k]) : run[k];
    }
    s.appendChild(renderValue(info));
    if (rep.outcome) {
      add(s, 'h3', null, 'Outcome');
      s.appendChild(renderValue(rep.outcome));
    }
    // the hang watchdog's record (docs/report.md, HANGS): each hang with every rank's place
    if (Array.isArray(rep.hangs) && rep.hangs.length) {
      add(s, 'h3', null, 'Hangs');
      for (const h of rep.hangs) s.appendChild(renderValue(h));
    }
  }

  function renderFindings(rep) {
    const s = section('Findings', 'findings');
    const f = rep.findings || [];
    if (!f.length) add(s, 'p', 'note', 'no findings');
    for (const x of f) {
      const box = add(s, 'div', 'finding ' + (x.severity || 'info'));
      box.dataset.id = x.id || '';
      const h = add(box, 'div');
      add(h, 'span', 'sev', x.severity || '');
      add(h, 'strong', null, x.title || x.id);
      add(h, 'span', 'muted', '  ' + (x.id || ''));
      if (x.advice && x.advice.length) {
        const ul = add(box, 'ul');
        for (const a of x.advice) add(ul, 'li', null, a);
      }
      if (x.evidence) {
        const d = add(box, 'details');
        add(d, 'summary', null, 'evidence');
        const ev = Object.assign({}, x.evidence);
        for (const k of ['from', 'to']) if (isNum(ev[k])) ev[k] = fmtTime(ev[k]);
        d.appendChild(renderValue(ev));
      }
    }
  }

  // The first rank's steps in step order: what the per-step charts draw.
  function rankSteps(steps) {
    if (!steps || !steps.step || !steps.step.length) return null;
    const n = steps.step.length;
    let r0 = Infinity;
    for (let i = 0; i < n; i++) if (steps.rank[i] < r0) r0 = steps.rank[i];
    const idx = [];
    for (let i = 0; i < n; i++) if (steps.rank[i] === r0) idx.push(i);
    idx.sort((a, b) => (steps.t0[a] - steps.t0[b]) || (steps.step[a] - steps.step[b]));
    const ranks = new Set(steps.rank).size;
    return {rank: r0, idx, ranks};
  }

  function renderGpus(doc, rep, rs) {
    const gpus = doc.gpus || [];
    const s = section('GPUs over the run', 'gpus');
    if (!gpus.length) {
      add(s, 'p', 'note', doc.gpus_note || 'no device samples for this run');
      return;
    }
    const base = doc.t_base || 0;
    const markers = [];
    const run = rep.run || {};
    if (rs) {
      const st = doc.steps;
      const every = Math.max(1, Math.ceil(rs.idx.length / 150));
      for (let j = 0; j < rs.idx.length; j += every) markers.push({t: base + st.t0[rs.idx[j]]});
    }
    for (const [k, c] of [['steps_from', 'rgba(26,127,55,0.9)'], ['steps_to', 'rgba(179,38,30,0.9)']]) {
      if (isNum(run[k])) markers.push({t: run[k], color: c, width: 2, dash: [4, 3]});
    }
    const note = [];
    if (rs) note.push('thin lines: step starts (rank ' + rs.rank + (rs.idx.length > 150 ? ', every ' + Math.ceil(rs.idx.length / 150) + 'th step' : '') + ')');
    note.push('dashed: first step begin (green), last step end (red)');
    add(s, 'p', 'muted', note.join('; '));
    const per = gpus.map((g) => g.kept < g.n ? 'GPU ' + g.index + ': ' + g.kept + ' of ' + g.n + ' samples (bucket means)' : null).filter(Boolean);
    if (per.length) add(s, 'p', 'note', per.join('; '));
    const metrics = [
      ['util', 'utilization', '%', (v) => fmtNum(v, 0) + '%'],
      ['mem', 'memory used', 'GiB', (v) => fmtNum(v, 1)],
      ['power', 'power draw', 'W', (v) => fmtNum(v, 0)],
      ['temp', 'temperature', '°C', (v) => fmtNum(v, 0)],
    ];
    const grid = add(s, 'div', 'grid2');
    for (const [key, label, unit, f] of metrics) {
      const tables = gpus.map((g) => [g.t.map((x) => base + x), g[key]]);
      const data = uPlot.join(tables);
      const series = [{}];
      gpus.forEach((g, i) => series.push({label: 'GPU ' + g.index, stroke: COLORS[i % COLORS.length],
        width: 1.5, spanGaps: false, value: (u, v) => (v === null || v === undefined ? '—' : fmtNum(v, 1) + ' ' + unit)}));
      const scales = {x: {time: true}};
      if (key === 'util') scales.y = {range: [0, 100]};
      addChart(grid, 'chart-gpu-' + key, 'GPU ' + label + ' (' + unit + ')', {
        series, scales, axes: [tsAxis, yAxis(unit, f)], hooks: {draw: [markerHook(markers)]},
        height: 200}, data);
    }
  }

  function renderPhases(doc, rep, rs) {
    const s = section('Step phases', 'phases');
    const ph = rep.phases || {};
    const names = Object.keys(ph);
    if (names.length) {
      const t = add(s, 'table');
      const hr = add(add(t, 'thead'), 'tr');
      for (const c of ['phase', 'mean ms', 'p50 ms', 'p95 ms', 'total s', 'count']) add(hr, 'th', c === 'phase' ? null : 'num', c);
      const tb = add(t, 'tbody');
      for (const n of names) {
        const p = ph[n] || {};
        if (!p.count) continue;
        const tr = add(tb, 'tr');
        tr.dataset.phase = n;
        add(tr, 'td', null, n);
        add(tr, 'td', 'num', fmtNum(p.mean_ms, 2));
        add(tr, 'td', 'num', fmtNum(p.p50_ms, 2));
        add(tr, 'td', 'num', fmtNum(p.p95_ms, 2));
        add(tr, 'td', 'num', isNum(p.total_ms) ? fmtNum(p.total_ms / 1000, 3) : 'n/a');
        add(tr, 'td', 'num', fmtNum(p.count, 0));
      }
    }
    if (!rs) {
      add(s, 'p', 'note', 'no step records: the phases of each step need the gpuscope Python package (or a sender of src/run/record.h) in the run');
      return;
    }
    const st = doc.steps;
    const present = STACK.filter((p) => st[p] && rs.idx.some((i) => isNum(st[p][i])));
    // x is the step's position in time order (step numbers may restart, e.g. a resumed run).
    const x = rs.idx.map((i, j) => j + 1);
    const cum = [];
    let acc = rs.idx.map(() => 0);
    for (const p of present) {
      acc = acc.map((a, j) => a + (isNum(st[p][rs.idx[j]]) ? st[p][rs.idx[j]] : 0));
      cum.push(acc.slice());
    }
    // Largest cumulative first, each filled to zero: later (smaller) ones paint over the lower part.
    const data = [x];
    const series = [{label: 'step', value: (u, v) => (v === null || v === undefined ? '—' : String(st.step[rs.idx[v - 1]]))}];
    for (let k = present.length - 1; k >= 0; k--) {
      const p = present[k];
      const col = COLORS[k % COLORS.length];
      data.push(cum[k]);
      series.push({label: p, stroke: col, fill: col + 'cc', width: 1, points: {show: false},
        value: (u, v, si, idx) => (idx === null || idx === undefined ? '—' : fmtNum(st[p][rs.idx[idx]], 2) + ' ms')});
    }
    let cap = 'each step\'s wall time by phase, stacked (ms), rank ' + rs.rank;
    if (rs.ranks > 1) cap += ' of ' + rs.ranks + ' ranks (the per-rank table has the others)';
    if (st.kept < st.n) cap += '; ' + st.kept + ' of ' + st.n + ' step records kept (bucket means)';
    addChart(s, 'chart-phases', cap, {series, scales: {x: {time: false}},
      axes: [Object.assign({label: 'step'}, tsAxis), yAxis('ms')], height: 260}, data);

    // Data and communication ratios over time: per step, smoothed over a window.
    const wall = rs.idx.map((i) => (isNum(st.data[i]) ? st.data[i] : 0) + (isNum(st.total_step[i]) ? st.total_step[i] : NaN));
    const win = Math.max(1, Math.round(rs.idx.length / 40));
    // p: a phase, or a list of phases of which each step's first known one counts
    function ratioSeries(p) {
      const ps = (Array.isArray(p) ? p : [p]).filter((q) => st[q]);
      const at = (i) => { for (const q of ps) if (isNum(st[q][i])) return st[q][i]; return NaN; };
      if (!rs.idx.some((i) => isNum(at(i)))) return null;
      const out = [];
      for (let j = 0; j < rs.idx.length; j++) {
        let num = 0; let den = 0;
        for (let k = Math.max(0, j - win + 1); k <= j; k++) {
          const v = at(rs.idx[k]);
          if (isNum(wall[k]) && wall[k] > 0) { num += isNum(v) ? v : 0; den += wall[k]; }
        }
        out.push(den > 0 ? num / den : null);
      }
      return out;
    }
    const base = doc.t_base || 0;
    const rd = [rs.idx.map((i) => base + st.t1[i])];
    const rser = [{}];
    const dr = ratioSeries('data');
    if (dr) { rd.push(dr); rser.push({label: 'data loading ratio', stroke: COLORS[0], width: 1.5, value: (u, v) => (v === null ? '—' : fmtNum(v, 3))}); }
    // as the headline's communication_time_ratio: the communication the step waited for
    // (exposed), a step's whole communication time only when exposure was not measured
    const cr = ratioSeries(['communication_exposed', 'communication']);
    if (cr) { rd.push(cr); rser.push({label: 'communication ratio (exposed)', stroke: COLORS[3], width: 1.5, value: (u, v) => (v === null ? '—' : fmtNum(v, 3))}); }
    if (rd.length > 1) {
      addChart(s, 'chart-ratios', 'data loading and communication time ratios over time (share of step wall time, data + step; mean over the last ' + win + ' step' + (win > 1 ? 's' : '') + ')',
        {series: rser, scales: {x: {time: true}, y: {range: [0, 1]}}, axes: [tsAxis, yAxis('ratio', (v) => fmtNum(v, 2))], height: 200}, rd);
    }

    // Tokens per second of each step row where the records carry tokens: the row's tokens over
    // its own t0 .. t1 (a bucket: its summed tokens over its span), as the headline's
    // train_tokens_per_second takes the steps' tokens over their span.
    if (st.tokens && rs.idx.some((i) => isNum(st.tokens[i]))) {
      const tps = rs.idx.map((i) => {
        const w = st.t1[i] - st.t0[i];
        return isNum(st.tokens[i]) && w > 0 ? st.tokens[i] / w : null;
      });
      let tcap = 'tokens / s of each step (its tokens over its wall time), rank ' + rs.rank;
      if (st.kept < st.n) tcap += '; a row of several steps: their tokens over their span';
      addChart(s, 'chart-tokens', tcap, {series: [{}, {label: 'tokens / s', stroke: COLORS[1], width: 1.5, spanGaps: true,
        value: (u, v) => (v === null || v === undefined ? '—' : fmtNum(v, 1))}],
      scales: {x: {time: true}}, axes: [tsAxis, yAxis('tokens / s', (v) => fmtNum(v, 0))], height: 200},
      [rs.idx.map((i) => base + st.t1[i]), tps]);
    }
  }

  function renderLogs(doc) {
    const lg = doc.logs;
    if (!lg || !lg.step || !lg.step.length) return;
    const s = section('Training curves', 'curves');
    const keys = Object.keys(lg.values || {});
    const grid = add(s, 'div', 'grid2');
    keys.forEach((k, i) => {
      const data = [lg.step, lg.values[k]];
      addChart(grid, 'chart-log-' + k.replace(/[^A-Za-z0-9_-]/g, '_'), k + ' by step', {
        series: [{label: 'step'}, {label: k, stroke: COLORS[i % COLORS.length], width: 1.5, spanGaps: true,
          value: (u, v) => (v === null ? '—' : fmtNum(v, 4))}],
        scales: {x: {time: false}}, axes: [Object.assign({label: 'step'}, tsAxis), yAxis(k, (v) => fmtNum(v, 3))], height: 200}, data);
    });
    if (lg.kept < lg.n) add(s, 'p', 'note', lg.kept + ' of ' + lg.n + ' log records kept');
  }

  function renderRanks(rep) {
    const pr = rep.per_rank;
    if (!Array.isArray(pr) || !pr.length) return;
    const s = section('Per rank', 'per-rank');
    s.appendChild(renderTable(pr));
    if (isObj(rep.slowest_rank)) {
      const r = rep.slowest_rank;
      add(s, 'p', null, (r.straggler ? 'straggler: rank ' : 'slowest rank (not a straggler): ') + r.rank +
        ' computes ' + fmtNum(r.busy_p50_ms, 2) + ' ms per step against the other ranks\' ' +
        fmtNum(r.others_busy_p50_ms, 2) + ' ms' + (isNum(r.slower_by_ratio) ? ' (' + fmtNum(r.slower_by_ratio * 100, 1) + ' % longer)' : '') +
        (isNum(r.others_comm_wait_p50_ms) ? '; the others wait ' + fmtNum(r.others_comm_wait_p50_ms, 2) + ' ms/step in communication' : ''));
    }
  }

  function renderGpuTable(rep) {
    const g = rep.gpus;
    if (!Array.isArray(g) || !g.length) return;
    const s = section('GPU figures', 'gpu-table');
    s.appendChild(renderTable(g.map((x) => {
      const o = {};
      for (const k of ['index', 'name', 'samples', 'utilization_avg_percent', 'utilization_max_percent',
        'memory_peak_gb', 'energy_joules', 'throttled_seconds_total', 'idle_periods_total', 'lost']) o[k] = x[k];
      return o;
    })));
  }

  function renderFacts(rep) {
    const f = rep.facts;
    const s = section('Settings (facts)', 'facts');
    if (!isObj(f) || !Object.keys(f).length) {
      add(s, 'p', 'note', 'the run sent no settings');
      return;
    }
    const t = add(s, 'table');
    const tb = add(t, 'tbody');
    for (const [k, v] of Object.entries(f)) {
      const tr = add(tb, 'tr');
      add(tr, 'td', 'mono', k);
      add(tr, 'td', null, scalarText(v));
    }
  }

  function renderStacks(doc, rep) {
    const st = rep.stacks;
    if (!isObj(st)) return;
    const s = section('Python stacks', 'stacks');
    const head = {};
    for (const [k, v] of Object.entries(st)) if (!isObj(v) && !Array.isArray(v)) head[k] = v;
    s.appendChild(renderValue(head));
    if (Array.isArray(st.top) && st.top.length) {
      add(s, 'h3', null, 'top functions (share of samples)');
      s.appendChild(renderTable(st.top, 1, 25));
    }
    if (Array.isArray(st.lines) && st.lines.length) {
      add(s, 'h3', null, 'hottest lines');
      s.appendChild(renderTable(st.lines, 1, 25));
    }
    for (const [k, v] of Object.entries(st)) {
      if (k === 'top' || k === 'lines' || (!isObj(v) && !Array.isArray(v))) continue;
      const d = add(s, 'details');
      add(d, 'summary', null, k);
      d.appendChild(renderValue(v, 1));
    }
    if (doc.flamegraph && doc.flamegraph.startsWith('data:image/svg+xml;')) {
      add(s, 'h3', null, 'flame graph (stacks.svg)');
      const img = add(s, 'img', 'flame');
      img.alt = 'flame graph of the run\'s Python stacks';
      img.src = doc.flamegraph;
    } else if (doc.flamegraph) {
      const p = add(s, 'p', null, 'flame graph: ');
      const a = add(p, 'a', null, 'stacks.svg');
      a.href = 'stacks.svg';
      add(p, 'span', 'muted', ' (in the run directory, next to this page; too large to embed)');
    }
  }

  function renderProfile(rep) {
    const p = rep.profile;
    if (p === undefined || p === null) return;
    const s = section('Profile', 'profile');
    s.appendChild(renderValue(p));
  }

  function renderReport(doc) {
    const rep = doc.report || {};
    renderRunInfo(doc, rep);
    renderHeadline(rep);
    renderFindings(rep);
    const rs = rankSteps(doc.steps);
    renderGpus(doc, rep, rs);
    renderPhases(doc, rep, rs);
    renderLogs(doc);
    renderRanks(rep);
    renderGpuTable(rep);
    renderFacts(rep);
    renderStacks(doc, rep);
    renderProfile(rep);
  }

  // ---- compare ----
  function changeCell(tr, c) {
    const td = add(tr, 'td', 'num');
    if (!c || !isNum(c.change)) { td.textContent = c && c.value !== undefined ? '' : ''; return; }
    td.textContent = (c.change > 0 ? '+' : '') + fmtNum(c.change);
    if (c.better === true) td.classList.add('up');
    if (c.better === false) td.classList.add('down');
  }
  function renderCompare(doc) {
    const cmp = doc.compare || {};
    const runs = cmp.runs || [];
    document.getElementById('title').textContent = 'compare: ' + runs.map((r) => r.label).join(' → ');
    document.title = document.getElementById('title').textContent + ' — gpuscope';
    document.getElementById('subtitle').textContent = runs.length + ' runs; changes against ' + (runs[0] ? runs[0].label : 'the first');
    const s = section('Runs', 'runs');
    s.appendChild(renderTable(runs.map((r, i) => ({'': String.fromCharCode(65 + i), label: r.label, from: r.origin,
      start: isNum(r.start_time) ? fmtTime(r.start_time) : null, source: r.source}))));
    function table(title, id, rows, unitOf) {
      const sec = section(title, id);
      if (!rows || !rows.length) { add(sec, 'p', 'note', 'nothing to compare'); return; }
      const t = add(sec, 'table');
      const hr = add(add(t, 'thead'), 'tr');
      add(hr, 'th', null, 'field');
      runs.forEach((r, i) => {
        add(hr, 'th', 'num', String.fromCharCode(65 + i));
        if (i) { add(hr, 'th', 'num', 'change'); add(hr, 'th', 'num', 'change %'); }
      });
      const tb = add(t, 'tbody');
      for (const row of rows) {
        const tr = add(tb, 'tr');
        tr.dataset.field = row.field;
        add(tr, 'td', 'mono', row.field);
        row.values.forEach((v, i) => {
          add(tr, 'td', 'num', fmtField(unitOf || row.field, v));
          if (i) {
            const c = row.changes[i - 1] || {};
            changeCell(tr, c);
            const td = add(tr, 'td', 'num', isNum(c.change_percent) ? (c.change_percent > 0 ? '+' : '') + fmtNum(c.change_percent, 1) + ' %' : '');
            if (c.better === true) td.classList.add('up');
            if (c.better === false) td.classList.add('down');
          }
        });
      }
    }
    table('Headline fields', 'cmp-fields', cmp.fields);
    table('Phases (mean ms per step)', 'cmp-phases', cmp.phases, 'mean_ms');
    const fs = section('Settings that differ (facts)', 'cmp-facts');
    if (!cmp.facts || !cmp.facts.length) add(fs, 'p', 'note', 'no setting differs (or the runs sent none)');
    else {
      const t = add(fs, 'table');
      const hr = add(add(t, 'thead'), 'tr');
      add(hr, 'th', null, 'setting');
      runs.forEach((r, i) => add(hr, 'th', null, String.fromCharCode(65 + i)));
      const tb = add(t, 'tbody');
      for (const f of cmp.facts) {
        const tr = add(tb, 'tr');
        tr.dataset.fact = f.key;
        add(tr, 'td', 'mono', f.key);
        for (const v of f.values) add(tr, 'td', null, v === null ? '—' : scalarText(v));
      }
    }
    const ff = section('Findings', 'cmp-findings');
    const fl = cmp.findings || [];
    if (!fl.length) add(ff, 'p', 'note', 'no findings in any run');
    for (const f of fl) {
      const p = add(ff, 'p');
      p.dataset.finding = f.id;
      add(p, 'strong', 'mono', f.id);
      add(p, 'span', null, ': ' + f.change + ' — ' + f.in.map((x) => String.fromCharCode(65 + x)).join(', ') + (f.title ? ' (' + f.title + ')' : ''));
    }
  }

  function main() {
    const node = document.getElementById('gs-data');
    let doc;
    try {
      doc = JSON.parse(node.textContent);
    } catch (e) {
      state.errors.push('data: ' + e.message);
      add(document.getElementById('main'), 'p', 'note', 'this file\'s data could not be read: ' + e.message);
      return;
    }
    state.kind = doc.kind;
    if (doc.kind === 'compare') renderCompare(doc);
    else renderReport(doc);
    const ft = document.getElementById('footer');
    ft.textContent = 'gpuscope ' + (doc.gpuscope || '') + ' · written ' + fmtTime(doc.generated) + (doc.origin ? ' from ' + doc.origin : '');
    state.ready = true;
  }
  try {
    main();
  } catch (e) {
    state.errors.push(String(e && e.stack || e));
    throw e;
  }
})();
