// Unit tests of web/format.js (the dashboard's formatting and data shaping) under node's
// built-in test runner. meson runs this file with --test-reporter=tap (tests/web/meson.build).
import assert from 'node:assert/strict';
import {test} from 'node:test';
import {
  CHARTS, NA, PALETTE, RANGES, alertText, appendPoint, badges, compareReports, fmtBytes,
  fmtBytesPair, grafanaJobUrl, runRanks,
  fmtCelsius, fmtPair,
  fmtDuration, fmtMHz, fmtPercent, fmtRate, fmtWatts, gpuColor, hiddenRows, hiddenText,
  customRange, historyUrl, isFiltered, processRows, runRows, runSummary, runsNote, sortRows,
  sparkPoints,
  tableRows, toSeries, tokenBucket, trimToCommon, visibilityNote,
} from '../../web/format.js';
import {logSeries, tagsText} from '../../web/format.js';

test('bytes use binary units with one decimal', () => {
  assert.equal(fmtBytes(0), '0 B');
  assert.equal(fmtBytes(1023), '1023 B');
  assert.equal(fmtBytes(1024), '1.0 KiB');
  assert.equal(fmtBytes(64825065472), '60.4 GiB');
  assert.equal(fmtBytes(85520809984), '79.6 GiB');
  assert.equal(fmtBytes(3 * 1024 ** 4), '3.0 TiB');
  assert.equal(fmtBytes(null), NA);
  assert.equal(fmtRate(2.5 * 1024 ** 2), '2.5 MiB/s');
});

test('absent readings are N/A, never zero', () => {
  for (const f of [fmtPercent, fmtWatts, fmtCelsius, fmtMHz, fmtDuration])
    for (const v of [null, undefined, NaN, 'x'])
      assert.equal(f(v), NA, `${f.name}(${v})`);
});

test('units for humans: %, W, °C, MHz', () => {
  assert.equal(fmtPercent(0.874), '87 %');
  assert.equal(fmtPercent(1), '100 %');
  assert.equal(fmtWatts(660.412), '660 W');
  assert.equal(fmtCelsius(44.6), '45 °C');
  assert.equal(fmtMHz(1980000000), '1980 MHz');
});

test('durations', () => {
  assert.equal(fmtDuration(12.9), '12 s');
  assert.equal(fmtDuration(250), '4 min 10 s');
  assert.equal(fmtDuration(7500), '2 h 5 min');
  assert.equal(fmtDuration(3 * 86400 + 4 * 3600 + 5), '3 d 4 h');
  assert.equal(fmtDuration(-1), NA);
});

test('palette is Okabe-Ito, 8 distinct colours, wraps', () => {
  assert.equal(new Set(PALETTE).size, 8);
  assert.equal(PALETTE[0], '#E69F00');
  assert.equal(gpuColor(8), gpuColor(0));
  assert.equal(gpuColor(3), '#F0E442');
});

test('history URL per range: live asks for 1 s buckets, others let the agent pick', () => {
  const live = RANGES.find((r) => r.id === 'live');
  const d7 = RANGES.find((r) => r.id === '7d');
  assert.equal(historyUrl(2, 'power_draw', live, 1000.2),
    '/api/v1/history?gpu=2&metric=power_draw&from=101&to=1001&step=1');
  assert.equal(historyUrl(0, 'memory_used', d7, 1e9),
    `/api/v1/history?gpu=0&metric=memory_used&from=${1e9 - 7 * 86400}&to=${1e9}`);
  assert.deepEqual(RANGES.map((r) => r.id), ['live', '1h', '6h', '24h', '7d', '30d']);
});

test('a range picked by date: its own end, from before to, at most a year', () => {
  const r = customRange(1000.5, 8200.2);
  assert.deepEqual(r, {id: 'custom', label: 'custom', seconds: 7201, to: 8201});
  assert.equal(historyUrl(1, 'power_draw', r, 99999),
    '/api/v1/history?gpu=1&metric=power_draw&from=1000&to=8201');
  assert.equal(customRange(5, 5), null);
  assert.equal(customRange(NaN, 5), null);
  assert.equal(customRange(0, 400 * 86400), null);
});

test('toSeries: union of times, gaps stay null, avg scaled', () => {
  const a = {points: [[10, 0.5, 0.6, 0.7], [11, 0.1, 0.2, 0.3]]};
  const b = {points: [[11, 1, 1, 1], [12, 0, 0.5, 1]]};
  const util = CHARTS.find((c) => c.id === 'utilization');
  const d = toSeries([a, b, null], util.scale);
  assert.deepEqual(d[0], [10, 11, 12]);
  assert.deepEqual(d[1].map((v) => (v == null ? v : Math.round(v))), [60, 20, null]);
  assert.deepEqual(d[2], [null, 100, 50]);
  assert.deepEqual(d[3], [null, null, null]);
});

test('toSeries of nothing is empty columns', () => {
  assert.deepEqual(toSeries([{points: []}, {points: []}]), [[], [], []]);
});

test('appendPoint adds a sample, ignores a repeat, trims to the window', () => {
  const d = [[0, 5], [1, 2], [3, null]];
  appendPoint(d, 10, [7, 8], 6);
  assert.deepEqual(d, [[5, 10], [2, 7], [null, 8]]);
  appendPoint(d, 10, [9, 9], 6);
  assert.deepEqual(d[0], [5, 10]);
  appendPoint(d, 11, [null, undefined], 100);
  assert.deepEqual(d, [[5, 10, 11], [2, 7, null], [null, 8, null]]);
});

test('badges name throttle reasons, errors, a degraded link, a lost GPU', () => {
  assert.deepEqual(badges({clocks_event_reasons: ['idle']}), []);
  const b = badges({clocks_event_reasons: ['power cap', 'SW thermal'],
    ecc_errors_uncorrected_volatile: 2, ecc_errors_corrected_volatile: 0, xid_last: 79,
    pcie_link_gen_current: 3, pcie_link_gen_max: 5, pcie_link_width_current: 16,
    pcie_link_width_max: 16, utilization_gpu: 0.9});
  assert.deepEqual(b.map((x) => x.text), ['throttled: power cap', 'throttled: SW thermal',
    'ECC uncorrected: 2', 'Xid 79', 'PCIe Gen3 x16 < Gen5 x16']);
  // an idle RTX 4090 at Gen1: power saving, no badge
  assert.deepEqual(badges({pcie_link_gen_current: 1, pcie_link_gen_max: 4,
    pcie_link_width_current: 16, pcie_link_width_max: 16, utilization_gpu: 0}), []);
  assert.deepEqual(badges({pcie_link_gen_current: 1, pcie_link_gen_max: 4}), []);
  // a lost GPU keeps the Xid it fell off with
  assert.deepEqual(badges({lost: true, xid_last: 79}),
    [{kind: 'bad', text: 'lost'}, {kind: 'bad', text: 'Xid 79'}]);
  assert.deepEqual(badges({lost: true}), [{kind: 'bad', text: 'lost'}]);
  assert.deepEqual(badges({pcie_link_gen_current: null, pcie_link_gen_max: 5}), []);
});

const procs = {processes: [
  {gpu: 1, pid: 30, user: 'bob', gpu_memory: 5e9, utilization_sm: 0.2, cpu_ratio: 1.5,
    memory_rss: 1e9, start_time: 900, command: 'python3 b.py', container: null},
  {gpu: 0, pid: 20, user: null, gpu_memory: 9e9, utilization_sm: null, cpu_ratio: null,
    memory_rss: null, start_time: null, name: 'cuda-app', command: null,
    container: {runtime: 'containerd', id: '3f2a0123456789abcdef'}},
  {gpu: 0, pid: 10, user: 'alice', gpu_memory: 1e9, utilization_sm: 0.9, cpu_ratio: 0.5,
    memory_rss: 2e9, start_time: 400, command: 'train', pod_uid: '7c1d2222-3333', slurm_job: null},
]};

test('processRows shapes the API entries', () => {
  const rows = processRows(procs, 1000);
  assert.equal(rows.length, 3);
  assert.equal(rows[0].running, 100);
  assert.equal(rows[1].command, 'cuda-app');
  assert.equal(rows[1].container, 'containerd 3f2a01234567');
  assert.equal(rows[2].container, 'pod 7c1d2222');
  assert.equal(rows[1].running, null);
  // the node names the pod (/var/log/pods): namespace/name rather than the UID
  const named = processRows({processes: [{...procs.processes[2],
    pod: {name: 'trainer-0', namespace: 'ml-team', container: 'pytorch'}}]}, 1000);
  assert.equal(named[0].container, 'pod ml-team/trainer-0');
  assert.deepEqual(processRows(null, 0), []);
});

test('sortRows: numbers, strings, both directions, nulls last', () => {
  const rows = processRows(procs, 1000);
  assert.deepEqual(sortRows(rows, 'gpu_memory', 'desc').map((r) => r.pid), [20, 30, 10]);
  assert.deepEqual(sortRows(rows, 'gpu_memory', 'asc').map((r) => r.pid), [10, 30, 20]);
  assert.deepEqual(sortRows(rows, 'sm', 'asc').map((r) => r.pid), [30, 10, 20]);
  assert.deepEqual(sortRows(rows, 'sm', 'desc').map((r) => r.pid), [10, 30, 20]);
  assert.deepEqual(sortRows(rows, 'user', 'asc').map((r) => r.pid), [10, 30, 20]);
  assert.deepEqual(sortRows(rows, 'gpu', 'asc').map((r) => r.pid), [10, 20, 30]);
  assert.notEqual(sortRows(rows, 'gpu'), rows);
});

test('alertText names where, rule, condition and value', () => {
  assert.equal(alertText({rule: 'throttling', metric: 'throttle', gpu: 0, value: 1, op: '>',
    threshold: 0}), 'GPU 0 · throttling: throttle > 0 (value 1)');
  assert.equal(alertText({rule: 'imbalance', metric: 'utilization_spread', gpu: null,
    value: 0.623456, op: '>', threshold: 0.5}),
  'node · imbalance: utilization_spread > 0.5 (value 0.6235)');
});

test('sparkPoints maps 0..1 into the box, skips gaps', () => {
  assert.equal(sparkPoints([0, 1, 0.5], 100, 20), '0,20 50,0 100,10');
  assert.equal(sparkPoints([0, null, 2], 10, 10), '0,10 10,0');
  assert.equal(sparkPoints([0.3], 10, 10), '');
});

test('every chart metric is one /api/v1/history keeps', () => {
  const kept = new Set(['utilization_gpu', 'memory_used', 'temperature_gpu', 'power_draw',
    'clock_sm', 'pcie_rx', 'pcie_tx', 'sm_active']);
  for (const c of CHARTS) assert.ok(kept.has(c.metric), c.metric);
});

test('tokenBucket: a burst, then the rate', () => {
  const b = tokenBucket(20, 3, 0);
  assert.deepEqual([b.take(0), b.take(0), b.take(0)], [0, 0, 0]);
  assert.equal(b.take(0), 50);
  assert.equal(b.take(25), 25);
  assert.equal(b.take(50), 0);
  assert.equal(b.take(10000), 0); // refilled, but never above the burst
  assert.deepEqual([b.take(10000), b.take(10000), b.take(10000)], [0, 0, 50]);
});

test('pairs on a card: used / total, draw / limit, SM / memory clock', () => {
  assert.equal(fmtBytesPair(22440000000, 85520809984), '20.9 / 79.6 GiB');
  assert.equal(fmtBytesPair(512, 2048), '0.5 / 2.0 KiB');
  assert.equal(fmtBytesPair(null, 2048), 'N/A / 2.0 KiB');
  assert.equal(fmtBytesPair(5, null), '5 B / N/A');
  assert.equal(fmtPair(585.6, 700, 1, 'W'), '586 / 700 W');
  assert.equal(fmtPair(1980000000, 2619000000, 1e-6, 'MHz'), '1980 / 2619 MHz');
  assert.equal(fmtPair(null, 700, 1, 'W'), 'N/A / 700 W');
});

test('trimToCommon: series end together; live drops the maybe partial last bucket', () => {
  const a = {gpu: 0, points: [[10, 1, 1, 1], [11, 1, 1, 1]]};
  const b = {gpu: 1, points: [[10, 2, 2, 2], [11, 2, 2, 2], [12, 2, 2, 2]]};
  const t = (docs) => docs.map((d) => d?.points.map((p) => p[0]) ?? null);
  assert.deepEqual(t(trimToCommon([a, b, null], false)), [[10, 11], [10, 11], null]);
  assert.deepEqual(t(trimToCommon([a, b, {points: []}], true)), [[10], [10], []]);
  assert.deepEqual(trimToCommon([null, {points: []}], true), [null, {points: []}]);
  assert.equal(a.points.length, 2); // the input is left alone
});

// A non-admin viewer's documents (docs/api.md "Visibility"): alice (uid 1000) sees her process
// on GPU 0; bob's two there and carol's on GPU 1 (NVML could not size one) are only counted.
const GIB = 1024 ** 3;
const filteredSnapshot = {hostname: 'n1', query_time_unix: 1000, gpus: [
  {index: 0, memory_used: 30 * GIB, memory_total: 80 * GIB,
    processes: [{pid: 10, uid: 1000, user: 'alice', gpu_memory: 10 * GIB}],
    hidden_processes: {count: 2, gpu_memory: 12 * GIB}},
  {index: 1, memory_used: 5 * GIB, memory_total: 80 * GIB, processes: [],
    hidden_processes: {count: 1, gpu_memory: null}},
  {index: 2, memory_used: 0, memory_total: 80 * GIB, processes: [],
    hidden_processes: {count: 0, gpu_memory: 0}},
]};
const filteredProcs = {query_time_unix: 1000,
  processes: [{gpu: 0, pid: 10, uid: 1000, user: 'alice', gpu_memory: 10 * GIB,
    start_time: 900, command: 'python3 train.py'}],
  hidden_processes: [
    {gpu: 1, gpu_uuid: 'GPU-b', count: 1, gpu_memory: null},
    {gpu: 0, gpu_uuid: 'GPU-a', count: 2, gpu_memory: 12 * GIB},
  ]};

test('hiddenRows: one row per GPU, by GPU, unknown memory stays unknown', () => {
  const h = hiddenRows(filteredProcs);
  assert.deepEqual(h.map((r) => [r.gpu, r.count, r.gpu_memory]),
    [[0, 2, 12 * GIB], [1, 1, null]]);
  assert.ok(h.every((r) => r.hidden === true && r.pid === undefined));
  assert.equal(hiddenText(h[0]), '2 processes of other users — 12.0 GiB');
  assert.equal(hiddenText(h[1]), '1 process of another user — memory unknown');
  assert.deepEqual(hiddenRows({processes: [], hidden_processes: [{gpu: 0, count: 0}]}), []);
  assert.deepEqual(hiddenRows(procs), []); // an admin's document has no hidden_processes
});

test('tableRows: hidden rows stay below the real rows whatever the sort', () => {
  const rows = processRows({processes: [...procs.processes, ...filteredProcs.processes]}, 1000);
  const h = hiddenRows(filteredProcs);
  for (const [key, dir] of [['gpu', 'asc'], ['gpu', 'desc'], ['gpu_memory', 'desc'],
    ['gpu_memory', 'asc'], ['user', 'asc'], ['pid', 'desc']]) {
    const t = tableRows(rows, h, key, dir);
    assert.equal(t.length, 6, `${key} ${dir}`);
    assert.deepEqual(t.slice(4).map((r) => [r.hidden, r.gpu]), [[true, 0], [true, 1]],
      `${key} ${dir}`);
    assert.deepEqual(t.slice(0, 4).map((r) => r.pid), sortRows(rows, key, dir).map((r) => r.pid));
  }
  assert.deepEqual(tableRows(rows, [], 'pid', 'asc').map((r) => r.pid), [10, 10, 20, 30]);
});

test('visibility note: for a filtered viewer only, counts the hidden, claims no GPU count', () => {
  assert.equal(isFiltered(filteredSnapshot), true);
  const note = visibilityNote(filteredSnapshot);
  assert.match(note, /3 processes of other users are only counted, per GPU/);
  assert.match(note, /GPU memory used includes theirs/);
  assert.match(note, /fewer GPUs than the node has/);
  assert.doesNotMatch(note, /\d+ GPUs? of/);
  const admin = {gpus: [{index: 0, processes: []}]};
  assert.equal(isFiltered(admin), false);
  assert.equal(visibilityNote(admin), '');
  assert.equal(visibilityNote(null), '');
  const none = {gpus: [{index: 0, hidden_processes: {count: 0, gpu_memory: 0}}]};
  assert.match(visibilityNote(none), /other users' processes would be only counted/);
});

test('badges: a filtered GPU says how many processes of others and their memory', () => {
  const b = badges(filteredSnapshot.gpus[0]);
  assert.deepEqual(b, [{kind: 'info', text: '2 processes of other users, 12.0 GiB'}]);
  assert.deepEqual(badges(filteredSnapshot.gpus[1]).map((x) => x.text),
    ['1 process of other users, N/A']);
  assert.deepEqual(badges(filteredSnapshot.gpus[2]), []);
  // memory used on the card is the GPU's total, others included
  assert.equal(fmtBytesPair(filteredSnapshot.gpus[0].memory_used,
    filteredSnapshot.gpus[0].memory_total), '30.0 / 80.0 GiB');
});

const runsDoc = {total: 2, from: 0, limit: 100, hidden: 1, runs: [
  {id: 7, name: 'qwen-sft', uid: 1000, user: 'ana', pid: 48211, start: 1000, end: null,
    steps: 120, state: 'running', gpu_avg_utilization_percent: 68.4,
    data_loading_time_ratio: 0.21, communication_time_ratio: 0.01,
    gpu_busy_estimate_percent: 72.5, findings: ['data_loading'], tags: {team: 'nlp', try: '3'}},
  {id: 6, name: '', uid: 0, user: null, start: 500, end: 512.4, steps: 3,
    state: 'interrupted', gpu_avg_utilization_percent: null, data_loading_time_ratio: 0.04,
    communication_time_ratio: null, gpu_busy_estimate_percent: 33, findings: []},
]};

test('runRows: name, user, duration (live while running), ratios, findings', () => {
  const r = runRows(runsDoc, 1100);
  assert.deepEqual(r.map((x) => [x.id, x.name, x.user, x.state, x.steps]),
    [[7, 'qwen-sft', 'ana', 'running', 120], [6, 'run 6', 'uid 0', 'interrupted', 3]]);
  assert.equal(r[0].duration, 100);
  assert.ok(Math.abs(r[1].duration - 12.4) < 1e-9);
  assert.equal(r[0].ratios, 'data 21.0 % · comm 1.0 % · GPU 68 %');
  assert.equal(r[1].ratios, 'data 4.0 % · comm N/A · GPU 33 %');
  assert.deepEqual(r[0].findings, ['data_loading']);
  assert.equal(r[0].tags, 'team=nlp · try=3');
  assert.equal(r[1].tags, '');
  assert.deepEqual(runRows(null, 0), []);
  // the agent's stalled verdict (docs/api.md) replaces the state, with how long
  const st = runRows({runs: [{...runsDoc.runs[0], stalled: true, stalled_seconds: 125}]}, 1100);
  assert.equal(st[0].stalled, true);
  assert.equal(st[0].state, `stalled (no step for ${fmtDuration(125)})`);
  assert.equal(r[0].stalled, false);
  // interrupted: marked apart from running and stalled; waiting for its sender while its end
  // is null (docs/agent.md, RESUMING A RUN), else ended without an end record
  assert.deepEqual(r.map((x) => x.interrupted), [false, true]);
  const wait = runRows({runs: [{...runsDoc.runs[1], end: null}]}, 1100);
  assert.equal(wait[0].state, 'interrupted (waiting for its sender)');
  assert.equal(wait[0].interrupted, true);
  assert.equal(wait[0].stalled, false);
  const both = runRows({runs: [{...runsDoc.runs[1], stalled: true, stalled_seconds: 9}]}, 1100);
  assert.deepEqual([both[0].stalled, both[0].interrupted], [true, false]);
});

test('runsNote: empty state, runs of others left out, socket off', () => {
  assert.equal(runsNote({runs: []}, 200), 'Runs appear here when a training process using ' +
    'the gpuscope Python package runs while the agent is up: see docs/python.md.');
  assert.equal(runsNote(runsDoc, 200), '1 run of other users is not shown (visibility policy).');
  assert.match(runsNote({runs: [], hidden: 2}, 200),
    /docs\/python.md\. 2 runs of other users are not shown/);
  assert.equal(runsNote({runs: [{id: 1}]}, 200), '');
  assert.match(runsNote({}, 404), /Runs are off on this agent/);
  // the agent's own reason, not a guess: a socket held by another agent is not "socket = off"
  assert.equal(runsNote({error: 'runs are unavailable: the step-record socket could not be ' +
    'opened (x)'}, 404), 'Runs are unavailable: the step-record socket could not be opened (x).');
  assert.doesNotMatch(runsNote({error: 'runs are unavailable: bind: in use'}, 404), /socket = off/);
});

test('runSummary: headline, phases with counts, GPUs, findings with advice', () => {
  const rep = {train_runtime: 55.4, steps: 200, ranks: 1, train_samples_per_second: 28.881,
    data_loading_time_ratio: 0.25, communication_time_ratio: null,
    gpu_avg_utilization_percent: 60, gpu_max_utilization_percent: 65,
    gpu_utilization_source: 'nvml', gpu_busy_estimate_percent: 88.7,
    gpu_peak_memory_allocated_gb: 29.1, train_tokens_per_second: 7524.44,
    tokens_per_second_per_gpu: 3762.22, mfu: 0.41236, peak_flops_precision: 'bf16',
    peak_flops_gpu: 'H100 SXM',
    phases: {data: {mean_ms: 26.95, p50_ms: 27, p95_ms: 36, total_ms: 5364, count: 199},
      forward: {mean_ms: 126.3, p50_ms: 126.3, p95_ms: 128.3, total_ms: 25260, count: 200},
      communication: {mean_ms: null, p50_ms: null, p95_ms: null, total_ms: null, count: 0}},
    gpus: [{index: 0, name: 'NVIDIA H100', utilization_avg_percent: 60,
      utilization_max_percent: 65, memory_peak_bytes: 32.1 * GIB, energy_joules: 22550.4,
      throttled_seconds_total: 3}],
    run: {state: 'ended', id: 7},
    findings: [{id: 'data_loading', severity: 'warning', title: 'Data loading is 25% of each step',
      advice: ['Raise dataloader_num_workers', 'pin_memory=True']}]};
  const s = runSummary(rep);
  const h = Object.fromEntries(s.headline);
  assert.equal(h.State, 'ended');
  assert.equal(h.Runtime, '55 s');
  assert.equal(h.Steps, '200 (1 rank)');
  assert.equal(h['Data loading'], '25.0 %');
  assert.equal(h.Communication, NA);
  assert.equal(h['GPU utilization'], 'avg 60 %, max 65 % (nvml)');
  assert.equal(h['Peak memory'], '29.10 GiB');
  assert.equal(h.Tokens, '7524.4 tokens/s (3762.2 per GPU)');
  assert.equal(h.MFU, '41.24 % (bf16 peak of H100 SXM)');
  assert.deepEqual(s.phases, [['data', '26.95', '27.00', '36.00', '5.364', '199'],
    ['forward', '126.30', '126.30', '128.30', '25.260', '200']]);
  assert.deepEqual(s.gpus, [['0', 'NVIDIA H100', '60 %', '65 %', '32.1 GiB', '22550 J', '3.0 s']]);
  assert.deepEqual(s.findings, [{id: 'data_loading', severity: 'warning',
    title: 'Data loading is 25% of each step',
    advice: ['Raise dataloader_num_workers', 'pin_memory=True']}]);
  const empty = runSummary({run: {state: 'interrupted', interrupted: true}});
  assert.equal(Object.fromEntries(empty.headline).State, 'interrupted (interrupted)');
  assert.equal(Object.fromEntries(empty.headline).MFU, NA);
  assert.equal(Object.fromEntries(runSummary({mfu: null, mfu_null_reason: 'cpu_only: x'})
    .headline).MFU, 'cpu_only: x');
  assert.deepEqual([empty.phases, empty.gpus, empty.findings], [[], [], []]);
});

test('per-rank rows and the straggler line', () => {
  const rep = {per_rank: [
    {rank: 0, device: 0, steps: 50, step_p50_ms: 100, step_p95_ms: 120,
      mean_ms: {data: 10, communication: 20}, samples_per_second: 80, tokens_per_second: 20480,
      mfu: 0.41236},
    {rank: 1, device: 1, steps: 50, step_p50_ms: 150.5, step_p95_ms: 170,
      mean_ms: {data: 10, communication: null}, samples_per_second: null}],
  slowest_rank: {rank: 1, straggler: true, busy_p50_ms: 150.5, others_busy_p50_ms: 100,
    slower_by_ratio: 0.505, others_comm_wait_p50_ms: 48, device: 1}};
  const r = runRanks(rep);
  assert.deepEqual(r.rows[0], ['0', '0', '50', '100.00', '120.00', '10.00', '20.00', '80.0',
    '20480.0', '41.24 %']);
  assert.deepEqual(r.rows[1].slice(6), [NA, NA, NA, NA]);
  assert.equal(r.slowest, 'Slowest: rank 1 computes 150.50 ms per step against the other ' +
    'ranks\' 100.00 ms (51 % longer) on GPU 1: a straggler, the others wait for it 48.00 ms/step.');
  assert.equal(runRanks({per_rank: rep.per_rank, slowest_rank: {...rep.slowest_rank,
    straggler: false, device: null}}).slowest, 'Slowest: rank 1 computes 150.50 ms per step ' +
    'against the other ranks\' 100.00 ms (51 % longer) (not a straggler).');
  assert.equal(runRanks({per_rank: [rep.per_rank[0]], slowest_rank: null}).slowest, null);
  assert.deepEqual(runRanks(null).rows, []);
});

test('the Grafana job link only from an http(s) base', () => {
  assert.equal(grafanaJobUrl('https://g.example:3000/', 'llama 7b/run#1'),
    'https://g.example:3000/d/gpuscope-training-job?var-job=llama+7b%2Frun%231');
  assert.equal(grafanaJobUrl('http://g/grafana', 'j'),
    'http://g/grafana/d/gpuscope-training-job?var-job=j');
  assert.equal(grafanaJobUrl('javascript:alert(1)', 'j'), null);
  assert.equal(grafanaJobUrl('not a url', 'j'), null);
  assert.equal(grafanaJobUrl('https://g', ''), null);
  assert.equal(grafanaJobUrl(undefined, 'j'), null);
});

test('two reports compared as gpuscope compare does', () => {
  const a = {train_runtime: 3636.36, train_samples_per_second: 2.2, gpu_avg_utilization_percent:
    61.8, data_loading_time_ratio: 0.08, communication_time_ratio: null, steps: 100,
    phases: {data: {mean_ms: 290.91}, forward: {mean_ms: 50}},
    facts: {dataloader_num_workers: 0, bf16: false, model: 'gpt2'},
    findings: [{id: 'data_loading', severity: 'warning'}, {id: 'low_utilization',
      severity: 'warning'}]};
  const b = {train_runtime: 2551.02, train_samples_per_second: 3.136, gpu_avg_utilization_percent:
    86.5, data_loading_time_ratio: 0.03, communication_time_ratio: null, steps: 100,
    phases: {data: {mean_ms: 76.53}, forward: {mean_ms: 50}},
    facts: {dataloader_num_workers: 8, bf16: true, model: 'gpt2'},
    findings: [{id: 'low_utilization', severity: 'warning'}, {id: 'healthy', severity: 'info'}]};
  const c = compareReports(a, b);
  const row = (k) => c.fields.find((f) => f[0] === k);
  assert.deepEqual(row('train_runtime'), ['train_runtime', '3636.36 s', '2551.02 s',
    '-1085.34 s', '-29.8 %', 'better']);
  assert.deepEqual(row('train_samples_per_second').slice(3), ['+0.936 /s', '+42.5 %', 'better']);
  assert.deepEqual(row('gpu_avg_utilization_percent').slice(3), ['+24.7 %', '+40.0 %', 'better']);
  assert.deepEqual(row('data_loading_time_ratio').slice(3), ['-0.050', '-62.5 %', 'better']);
  assert.equal(row('communication_time_ratio'), undefined); // null in both: no row
  assert.deepEqual(row('steps').slice(3), ['+0', '+0.0 %', '']);
  assert.deepEqual(c.phases[0], ['data', '290.91 ms', '76.53 ms', '-214.38 ms', '-73.7 %',
    'better']);
  assert.deepEqual(c.facts, [['bf16', 'false', 'true'], ['dataloader_num_workers', '0', '8']]);
  assert.deepEqual(c.findings, [['data_loading', 'warning', '-', 'went away'],
    ['low_utilization', 'warning', 'warning', 'in both'], ['healthy', '-', 'info', 'appeared']]);
  const worse = compareReports(b, a);
  assert.equal(worse.fields.find((f) => f[0] === 'train_runtime')[5], 'worse');
  assert.deepEqual(compareReports({train_runtime: 5}, {}).fields[0],
    ['train_runtime', '5.00 s', NA, '', '', '']);
});

test('NVLink card row: links up, throughput, errors; nothing for a PCIe card', async () => {
  const {nvlinkText} = await import('../../web/format.js');
  assert.equal(nvlinkText({nvlink_links: null}), null);
  assert.equal(nvlinkText({}), null);
  const h = nvlinkText({nvlink_links: 18, nvlink_links_active: 18, nvlink_tx: 11811160064,
    nvlink_rx: 1073741824, nvlink_link_speed: 26562000000, nvlink_replay_errors: 0,
    nvlink_crc_flit_errors: 0});
  assert.equal(h.text, '18/18 · 12.0 GiB/s');
  assert.equal(h.title, 'NVLink: 18 of 18 links active, 24.7 GiB/s each way per link; ' +
    'tx 11.0 GiB/s, rx 1.0 GiB/s; errors: replay 0, CRC flit 0');
  assert.equal(h.down, false);
  const d = nvlinkText({nvlink_links: 18, nvlink_links_active: 17, nvlink_replay_errors: 41,
    nvlink_recovery_errors: 1, nvlink_crc_flit_errors: 118, nvlink_crc_data_errors: 3});
  assert.equal(d.text, '17/18 · 163 err');
  assert.equal(d.down, true);
  assert.equal(d.errors, 163);
});

test('MIG devices become cards with their processes; the chart note names MIG GPUs', async () => {
  const {migCards, migUtilNote} = await import('../../web/format.js');
  const g = {index: 0, lost: false, utilization_gpu: null,
    unavailable: {utilization_gpu: 'mig_mode'},
    mig_devices: [
      {gi_id: 2, ci_id: 0, uuid: 'MIG-a', name: 'NVIDIA H100 80GB HBM3 MIG 3g.40gb',
        profile: '3g.40gb', memory_used: 11629756416, memory_total: 42412802048,
        sm_count: 60, graphics_active: 0.99, placement: {start: 4, size: 4}},
      {gi_id: 10, ci_id: 0, name: 'NVIDIA H100 80GB HBM3 MIG 1g.10gb', memory_used: null,
        memory_total: 10468982784},
    ],
    processes: [
      {pid: 21180, gi_id: 2, ci_id: 0, name: 'memhog', gpu_memory: 2407530496},
      {pid: 21198, gi_id: 2, ci_id: 0, name: 'gpu_burn', user: 'root', gpu_memory: 7847542784},
      {pid: 99, gi_id: 9, ci_id: 0, name: 'other', gpu_memory: 1},
    ]};
  const c = migCards(g);
  assert.equal(c.length, 2);
  assert.equal(c[0].title, 'MIG 3g.40gb');
  assert.equal(c[0].ids, 'GI 2 · CI 0 · 60 SMs · slices 4–7');
  assert.equal(migCards({...g, mig_devices: [{...g.mig_devices[1], placement: {start: 1, size: 1}}]})[0]
    .ids, 'GI 10 · CI 0 · slice 1');
  assert.equal(c[0].mem, '10.8 / 39.5 GiB');
  assert.ok(Math.abs(c[0].ratio - 11629756416 / 42412802048) < 1e-12);
  assert.equal(c[0].gr, 0.99);
  assert.deepEqual(c[0].procs.map((p) => p.pid), [21198, 21180]); // largest first
  assert.equal(c[0].procs[0].text, 'gpu_burn 21198 (root) · 7.3 GiB');
  assert.equal(c[1].title, 'MIG 1g.10gb'); // profile from the name
  assert.equal(c[1].mem, `${NA} / 9.8 GiB`);
  assert.equal(c[1].ratio, null); // no bar from an absent reading
  assert.deepEqual(c[1].procs, []);
  assert.deepEqual(migCards({...g, lost: true}), []);
  assert.deepEqual(migCards({index: 1}), []);
  assert.match(migUtilNote({gpus: [g, {index: 1, utilization_gpu: 0.5}]}),
    /^GPU 0: utilization not available in MIG mode/);
  assert.equal(migUtilNote({gpus: [{index: 1, utilization_gpu: null}]}), '');
});

test('logSeries: steps as x in order, loss and learning rate columns, gaps null', () => {
  const logs = [
    {step: 20, t: 2, rank: 0, values: {loss: 1.5, learning_rate: 2e-5}},
    {step: 10, t: 1, rank: 0, values: {loss: 2.0, learning_rate: 1e-5, epoch: 0.1}},
    {step: 30, t: 3, rank: 0, values: {grad_norm: 0.7}}, // none of the keys: left out
    {step: 30, t: 3, rank: 0, values: {loss: 1.2}},
  ];
  const s = logSeries(logs);
  assert.equal(s.time, false);
  assert.deepEqual(s.x, [10, 20, 30]);
  assert.deepEqual(s.series, [{key: 'loss', values: [2.0, 1.5, 1.2]},
    {key: 'learning_rate', values: [1e-5, 2e-5, null]}]);
  // a record without a step: time on x
  const t = logSeries([{step: null, t: 5, values: {loss: 1}}, {step: 1, t: 4, values: {loss: 2}}]);
  assert.deepEqual([t.time, t.x, t.series[0].values], [true, [4, 5], [2, 1]]);
  // only the keys present; nothing at all
  assert.deepEqual(logSeries([{step: 1, values: {learning_rate: 3}}]).series.map((x) => x.key),
    ['learning_rate']);
  assert.deepEqual(logSeries(null), {time: true, x: [], series: []});
  assert.deepEqual(logSeries([{step: 1, values: {loss: NaN}}]).x, []);
  // two ranks logging the same steps: the lowest rank's records only
  const ddp = logSeries([{step: 1, rank: 1, values: {loss: 9}},
    {step: 1, rank: 0, values: {loss: 3}}, {step: 2, rank: 1, values: {loss: 8}},
    {step: 2, rank: 0, values: {loss: 2}}]);
  assert.deepEqual([ddp.x, ddp.series[0].values], [[1, 2], [3, 2]]);
});

test('tagsText: key=value pairs in order; none is empty', () => {
  assert.equal(tagsText({team: 'nlp', try: '3'}), 'team=nlp · try=3');
  assert.equal(tagsText({}), '');
  assert.equal(tagsText(null), '');
  assert.equal(tagsText({n: 1}), '');
});

test('history charts: a minute of time axis from the first point, never years', async () => {
  const {timeRange} = await import('../../web/format.js');
  const t = 1796198400;
  assert.deepEqual(timeRange(t, t, 60), [t - 60, t]); // one point: the minute before it
  assert.deepEqual(timeRange(t - 10, t, 60), [t - 60, t]);
  assert.deepEqual(timeRange(t - 900, t, 60), [t - 900, t]); // enough data: the data's
  assert.deepEqual(timeRange(null, null, 60), [null, null]);
});

test('flat series: a y range at least 4 label steps wide, no repeated tick labels', async () => {
  const {valueRange, tickLabels, CHARTS} = await import('../../web/format.js');
  const mem = CHARTS.find((c) => c.id === 'memory');
  const [lo, hi] = valueRange(11.5, 11.5, mem.step);
  assert.ok(hi - lo >= 4 * mem.step - 1e-9 && lo < 11.5 && hi > 11.5, `${lo}..${hi}`);
  assert.deepEqual(valueRange(0, 0, 1), [0, 4]); // never below 0 for data that is not
  const [a, b] = valueRange(40, 80, 1);
  assert.ok(a < 40 && b > 80 && a >= 0);
  // uPlot's ticks on the old auto range of a flat 11.5 GiB line printed "11.5 GiB" twice
  assert.deepEqual(tickLabels([11.48, 11.5, 11.52, 11.6], mem.fmt),
    ['11.5 GiB', '', '', '11.6 GiB']);
  assert.deepEqual(tickLabels([null, 1], mem.fmt), ['', '1.0 GiB']);
  for (const c of CHARTS) assert.ok(c.range || c.step > 0, `${c.id}: a fixed range or a step`);
});

test('usage: the API rows to the Usage table, idle-held highlighted from half the held time', async () => {
  const {usageRows, usageUrl, usageNote, USAGE_RANGES, USAGE_IDLE_SHARE} =
    await import('../../web/format.js');
  assert.equal(USAGE_IDLE_SHARE, 0.5);
  assert.deepEqual(USAGE_RANGES.map((r) => r.seconds), [3600, 86400, 604800, 2592000]);
  assert.equal(usageUrl('job', 3600, 1764403600.4), '/api/v1/usage?by=job&from=1764400000&to=1764403601');
  const doc = {by: 'job', currency: 'EUR', groups_dropped: 0, rows: [
    {key: '4242', user: 'alice', uid: 1001, held_gpu_hours: 8, busy_share: 0.06,
      idle_held_hours: 7.5, peak_memory_bytes: 7 * 1024 ** 3, energy_kwh: 1.234, cost: 20.5},
    {key: '', user: null, uid: 1002, held_gpu_hours: 12.5, busy_share: 0.874,
      idle_held_hours: 0, peak_memory_bytes: null, energy_kwh: null, cost: null},
    {key: '7', user: 'bob', uid: 1003, held_gpu_hours: 2, busy_share: 0.5,
      idle_held_hours: 0.99, peak_memory_bytes: 1024 ** 3, energy_kwh: 12.34, cost: null}]};
  const rows = usageRows(doc);
  assert.deepEqual(rows[0], {key: '4242', user: 'alice', held: '8.00', busy: '6 %',
    idleHeld: '7.50 (94 %)', idle: true, peak: '7.0 GiB', energy: '1.23 kWh', cost: '20.50 EUR'});
  assert.deepEqual(rows[1], {key: '(no job)', user: 'uid 1002', held: '12.5', busy: '87 %',
    idleHeld: '0.00 (0 %)', idle: false, peak: NA, energy: NA, cost: '—'});
  assert.equal(rows[2].idle, false); // 0.99 of 2 h: under half
  assert.equal(rows[2].energy, '12.3 kWh');
  assert.equal(usageNote(doc, 200), '');
  assert.match(usageNote({rows: []}, 200), /^No GPU was held in this range/);
  assert.equal(usageNote({error: 'history.db: damaged'}, 503), 'Usage: history.db: damaged');
  assert.equal(usageNote({rows: doc.rows, groups_dropped: 3}, 200), '3 more rows not shown.');
  assert.deepEqual(usageRows(null), []);
});
