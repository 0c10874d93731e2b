// memtrace's HTML report: draws the data that `memtrace report` embeds in <script id="memtrace-data"> (its
// shape: docs/report.md) with uPlot (the timelines) and d3-flame-graph (the live-at-peak icicle). Everything is
// drawn from the embedded data: nothing is fetched. Text from the trace goes into the page as text, never as HTML.
// Data of many processes ("kind": "fleet") draws the fleet's page instead: summary cards, the process tree, a card
// per GPU (with the combined timeline where there is one), the ranks, wrong devices and merged leaks.
// When everything is drawn the page sets window.memtraceReport = {ready: true, charts, flameNodes, markers} (and
// series: the series each chart draws, x not counted; drawnMs: milliseconds from navigation to drawn; for a
// fleet, markers counts the combined peaks marked).
(function () {
  'use strict';

  const NS_PER_S = 1e9;
  const PHASE_FILL = {
    forward: 'rgba(59, 130, 246, 0.10)',
    backward: 'rgba(245, 158, 11, 0.13)',
    optimizer: 'rgba(16, 185, 129, 0.13)',
    other: 'rgba(148, 163, 184, 0.12)',
  };
  const COLORS = {
    allocated: '#2563eb', reserved: '#d97706', driver: '#7c3aed',
    device_used: '#52606d', process_used: '#0d9488', other_processes: '#db2777', oom: '#dc2626',
  };
  const TOTALS = ['allocated', 'reserved', 'driver'];
  const SAMPLED = [
    {key: 'device_used', label: 'device used (NVML)'},
    {key: 'process_used', label: 'this process (NVML)'},
    {key: 'other_processes', label: 'other processes'},
  ];

  // ---- formatting -------------------------------------------------------------------------------------------
  const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  // "9.31 GiB"; below 1 KiB "512 B" (the text reports' units).
  function fmtBytes(bytes) {
    if (bytes == null) return '—';
    const neg = bytes < 0;
    let v = Math.abs(bytes);
    if (v < 1024) return (neg ? '-' : '') + v + ' B';
    let u = 0;
    while (v >= 1024 && u < UNITS.length - 1) { v /= 1024; u++; }
    return (neg ? '-' : '') + v.toFixed(2) + ' ' + UNITS[u];
  }
  function exactBytes(bytes) { return bytes == null ? '' : Number(bytes).toLocaleString('en-US') + ' B'; }
  // "12.345 s" from a millisecond up, "14 us" below.
  function fmtTime(ns) {
    if (ns == null) return '—';
    if (Math.abs(ns) >= 1e6 || ns === 0) return (ns / NS_PER_S).toFixed(3) + ' s';
    return Math.round(ns / 1e3) + ' us';
  }
  // A time with the decimals a resolution of `resolutionNs` needs (at least milliseconds): "0.00625 s".
  function fmtTimeAt(ns, resolutionNs) {
    if (!(resolutionNs > 0) || resolutionNs >= 1e6) return fmtTime(ns);
    const decimals = Math.min(9, Math.ceil(-Math.log10(resolutionNs / NS_PER_S) - 1e-9));
    return (ns / NS_PER_S).toFixed(decimals) + ' s';
  }
  function fmtDuration(ns) {
    if (ns >= 60 * NS_PER_S) {
      const s = Math.round(ns / NS_PER_S);
      return Math.floor(s / 60) + ' min ' + (s % 60) + ' s';
    }
    return fmtTime(ns);
  }
  function fmtCount(n) { return Number(n).toLocaleString('en-US'); }
  // An axis tick in seconds with as many decimals as the tick spacing needs.
  function fmtAxisSeconds(v, incr) {
    const decimals = incr >= 1 ? 0 : Math.min(9, Math.ceil(-Math.log10(incr) - 1e-9));
    return v.toFixed(decimals) + ' s';
  }
  function fmtAxisBytes(v, incr) {
    if (v === 0) return '0';
    let u = 0;
    while (u < UNITS.length - 1 && Math.abs(incr) >= 1024 ** (u + 1)) u++;
    const scaled = v / 1024 ** u;
    const step = incr / 1024 ** u;
    const decimals = step >= 1 ? 0 : Math.min(3, Math.ceil(-Math.log10(step) - 1e-9));
    return scaled.toFixed(decimals) + ' ' + UNITS[u];
  }
  // Byte tick spacings: powers of two of each unit, so that ticks fall on round binary sizes.
  const BYTE_INCRS = (function () {
    const out = [];
    for (let u = 0; u < 5; u++)
      for (const m of [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]) out.push(m * 1024 ** u);
    return out;
  })();
  const TIME_INCRS = (function () {
    const out = [];
    for (let e = -9; e <= 6; e++) for (const m of [1, 2, 5]) out.push(m * 10 ** e);
    return out;
  })();

  // ---- DOM helpers ------------------------------------------------------------------------------------------
  // el('div', {class: 'x', title: 't'}, child, 'text', ...): children are nodes or text (never parsed as HTML).
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    if (attrs) {
      for (const [k, v] of Object.entries(attrs)) {
        if (v == null || v === false) continue;
        if (k === 'style') node.style.cssText = v;
        else if (k.startsWith('on')) node.addEventListener(k.slice(2), v);
        else node.setAttribute(k, v === true ? '' : v);
      }
    }
    for (const c of children) {
      if (c == null || c === false) continue;
      node.append(c instanceof Node ? c : String(c));
    }
    return node;
  }
  function byId(id) { return document.getElementById(id); }

  // First index i with a[i] >= v (a ascending).
  function lowerBound(a, v) {
    let lo = 0, hi = a.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (a[mid] < v) lo = mid + 1; else hi = mid;
    }
    return lo;
  }

  function stackTitle(site) {
    const stack = site && site.stack;
    return stack && stack.length ? stack.join('\n') : '';
  }
  function siteCell(site) {
    const stack = (site && site.stack) || [];
    if (stack.length <= 1) return el('td', {class: 'site', title: stackTitle(site)}, (site && site.label) || '?');
    return el('td', {class: 'site'},
      el('details', {class: 'stack'},
        el('summary', {title: 'the call stack, root first'}, site.label || stack[stack.length - 1]),
        el('ol', null, ...stack.map(f => el('li', null, f)))));
  }
  function bar(fraction) {
    const pct = Math.max(0, Math.min(1, fraction || 0)) * 100;
    return el('div', {class: 'bar'}, el('span', {style: 'width:' + pct.toFixed(1) + '%'}));
  }

  // ---- the page ---------------------------------------------------------------------------------------------
  const data = JSON.parse(byId('memtrace-data').textContent);
  const trace = data.trace || {};
  const devices = data.devices || [];
  const iterations = (data.iterations && data.iterations.spans) || [];
  const ooms = data.ooms || [];
  const leaks = data.leaks || [];
  const traps = data.traps || [];
  const iterationEnds = iterations.map(s => s.end_ns);  // ascending: the spans follow each other
  const timelines = [];   // one per device: {chart, zoomToNs(begin, end)}
  const report = {ready: false, charts: 0, flameNodes: 0, markers: 0, series: [], drawnMs: null};
  window.memtraceReport = report;

  function drawHeader() {
    const command = trace.command || trace.path || 'trace';
    byId('title-command').textContent = command;
    byId('title-command').title = command;
    document.title = 'memtrace: ' + command;
    const facts = byId('trace-facts');
    const items = [];
    if (trace.path) items.push(el('span', {class: 'mono'}, trace.path));
    if (trace.host || trace.pid) items.push(el('span', null, 'pid ' + (trace.pid || '?') + (trace.host ? ' on ' + trace.host : '')));
    if (trace.duration_ns != null) items.push(el('span', null, fmtDuration(trace.duration_ns)));
    if (trace.events != null) items.push(el('span', null, fmtCount(trace.events) + ' events'));
    if (trace.truncated) items.push(el('span', {class: 'warn'}, 'trace truncated'));
    if (trace.attach) items.push(el('span', null, trace.attach));  // a trace that began by attach
    facts.append(...items);
  }

  function card(kind, label, value, detail, title) {
    return el('div', {class: 'card ' + kind, title: title || null},
      el('div', {class: 'label'}, label), el('div', {class: 'value'}, value), el('div', {class: 'detail'}, detail || ''));
  }

  function drawSummary() {
    const cards = [];
    for (const total of TOTALS) {
      let best = null;
      for (const dev of devices) {
        const p = dev.timeline && dev.timeline.peaks && dev.timeline.peaks[total];
        if (p && (!best || p.bytes > best.p.bytes)) best = {p, dev};
      }
      if (!best) continue;
      const where = (devices.length > 1 ? 'device ' + best.dev.device + ', ' : '') + 'at ' + fmtTime(best.p.time_ns);
      cards.push(card(total, 'Peak ' + total, fmtBytes(best.p.bytes), where, exactBytes(best.p.bytes)));
    }
    if (iterations.length) {
      cards.push(card('', 'Iterations', fmtCount(iterations.length), data.iterations.source || '', data.iterations.source));
    }
    cards.push(card(ooms.length ? 'bad' : 'good', 'Out of memory', ooms.length ? fmtCount(ooms.length) : 'none',
      ooms.length ? 'first at ' + fmtTime(ooms[0].time_ns) : ''));
    const growing = leaks.filter(l => l.growth_per_iteration_bytes > 0);
    cards.push(card(growing.length ? 'bad' : '', 'Leak candidates', fmtCount(leaks.length),
      growing.length ? growing.length + ' growing per iteration' : 'none grows per iteration'));
    if (traps.length) cards.push(card('bad', 'Traps', fmtCount(traps.length), traps[0].title, traps[0].title));
    byId('summary').append(...cards);
  }

  // ---- the timeline of one device -----------------------------------------------------------------------------
  // Series: x (seconds), then for each total its bin max and bin min (a band between them, so that no peak is lost
  // whatever the zoom), then the sampled series present.
  function drawDevice(dev) {
    const tl = dev.timeline || {levels: []};
    const levels = (tl.levels || []).filter(l => l.t_ns && l.t_ns.length);
    const section = el('section', {class: 'panel device'});
    const name = 'Device ' + dev.device + (dev.name ? ' · ' + dev.name : '');
    section.append(el('h2', null, name, dev.total_bytes ? el('span', {class: 'total'}, fmtBytes(dev.total_bytes) + ' total') : null));
    byId('devices').append(section);
    if (!levels.length) {
      section.append(el('div', {class: 'empty'}, 'No memory events on this device.'));
      return;
    }
    const timeline = makeTimeline(dev, tl, levels, section);
    timelines.push(timeline);
    drawBelowChart(dev, section, timeline, levels[0]);
    drawFlame(dev, section);
  }

  function makeTimeline(dev, tl, levels, section) {
    const sampled = SAMPLED.filter(s => Array.isArray(tl[s.key]) && tl[s.key].length);
    const lastT = Math.max(...levels.map(l => l.t_ns[l.t_ns.length - 1] + (l.bin_ns || 0)));
    const endNs = Math.max(trace.duration_ns || 0, lastT, 1);
    const devOoms = ooms.filter(o => o.device === dev.device);
    const peaks = tl.peaks || {};
    let moment = null;    // ns of the chosen moment (a vertical line), or null
    let current = null;   // {level, lo, hi}: the level and the time range (ns) whose points the chart holds

    // The chart's points for level `li` between lo and hi (ns), one bin either side, joined with the samples.
    function buildData(li, lo, hi) {
      const L = levels[li];
      const t = L.t_ns;
      const i0 = Math.max(0, lowerBound(t, lo) - 1);
      const i1 = Math.min(t.length, lowerBound(t, hi) + 1);
      const xs = [];
      const cols = TOTALS.flatMap(() => [[], []]);
      for (let i = i0; i < i1; i++) {
        xs.push(t[i] / NS_PER_S);
        TOTALS.forEach((k, j) => {
          cols[2 * j].push(L[k + '_max'] ? L[k + '_max'][i] : null);
          cols[2 * j + 1].push(L[k + '_min'] ? L[k + '_min'][i] : null);
        });
      }
      // The last bin (or change) lasts to its bin's end (or the trace's end): a closing point draws it.
      if (i1 === t.length && xs.length) {
        const close = L.bin_ns > 0 ? t[t.length - 1] + L.bin_ns : endNs;
        if (close / NS_PER_S > xs[xs.length - 1]) {
          xs.push(close / NS_PER_S);
          for (const c of cols) c.push(c[c.length - 1]);
        }
      }
      const table = [xs, ...cols];
      if (!sampled.length) return table;
      const tables = [table];
      for (const s of sampled) {
        const pts = tl[s.key];
        const ts = pts.map(p => p[0]);
        const j0 = Math.max(0, lowerBound(ts, lo) - 1);
        const j1 = Math.min(pts.length, lowerBound(ts, hi) + 1);
        const sx = [], sy = [];
        for (let j = j0; j < j1; j++) { sx.push(pts[j][0] / NS_PER_S); sy.push(pts[j][1]); }
        tables.push([sx, sy]);
      }
      return uPlot.join(tables);
    }

    // The finest level with about the plot's width in points in [lo, hi]: at most two per pixel, so that a level
    // a little finer than the pixels still wins over one far coarser (levels are often 10 to 25 times apart).
    function chooseLevel(lo, hi, widthPx) {
      for (let i = levels.length - 1; i > 0; i--) {
        const t = levels[i].t_ns;
        if (lowerBound(t, hi) - lowerBound(t, lo) <= widthPx * 2) return i;
      }
      return 0;
    }

    const series = [{}];
    for (const k of TOTALS) {
      const stroke = COLORS[k];
      series.push({label: k, stroke, width: 1.6, paths: uPlot.paths.stepped({align: 1}), spanGaps: true,
                   points: {show: false}, fill: null});
      series.push({label: k + ' (bin min)', stroke, width: 0.8, paths: uPlot.paths.stepped({align: 1}), spanGaps: true,
                   points: {show: false}, alpha: 0.9});
    }
    for (const s of sampled) {
      series.push({label: s.label, stroke: COLORS[s.key], width: 1.4, dash: [5, 4], spanGaps: true, points: {show: false}});
    }
    const bands = TOTALS.map((k, j) => ({series: [1 + 2 * j, 2 + 2 * j], fill: hexAlpha(COLORS[k], 0.22)}));

    // Toolbar: zoom buttons, legend (toggles + the values under the cursor), what the chart shows.
    const legend = el('div', {class: 'legend'});
    const legendVals = [];
    const legendItems = TOTALS.map((k, j) => ({label: k, color: COLORS[k], idx: [1 + 2 * j, 2 + 2 * j], dashed: false}))
      .concat(sampled.map((s, j) => ({label: s.label, color: COLORS[s.key], idx: [7 + j], dashed: true})));
    const viewInfo = el('span', {class: 'view-info'});
    const btn = (label, title, fn) => el('button', {type: 'button', title, onclick: fn}, label);
    const toolbar = el('div', {class: 'toolbar'},
      el('div', {class: 'buttons'},
        btn('◀', 'pan left', () => pan(-0.5)), btn('▶', 'pan right', () => pan(0.5)),
        btn('−', 'zoom out', () => zoomBy(2)), btn('+', 'zoom in', () => zoomBy(0.5)),
        btn('reset', 'the whole trace', () => setWindow(0, endNs))),
      viewInfo, phaseKey());
    const chartDiv = el('div', {class: 'chart'});
    section.append(toolbar, legend, chartDiv);

    const chart = new uPlot({
      width: chartWidth(section), height: 340,
      legend: {show: false},
      cursor: {drag: {x: true, y: false, setScale: true}, bind: {dblclick: () => null}, points: {show: false}},
      scales: {
        // Not auto: setData keeps the window (the points around it change with the zoom, not the window).
        x: {time: false, auto: false, range: (u, min, max) => [min == null ? 0 : min, max == null ? endNs / NS_PER_S : max]},
        y: {range: (u, min, max) => [0, max > 0 ? max * 1.12 : 1]},
      },
      axes: [
        {space: 90, incrs: TIME_INCRS, values: (u, splits, ax, space, incr) => splits.map(v => fmtAxisSeconds(v, incr)),
         grid: {stroke: '#eef2f6'}, ticks: {stroke: '#d9e2ec'}},
        {size: 76, space: 36, incrs: BYTE_INCRS, values: (u, splits, ax, space, incr) => splits.map(v => fmtAxisBytes(v, incr)),
         grid: {stroke: '#eef2f6'}, ticks: {stroke: '#d9e2ec'}},
      ],
      series, bands,
      hooks: {
        drawClear: [u => drawBands(u)],
        draw: [u => drawMarkers(u)],
        setScale: [(u, key) => { if (key === 'x') scheduleRefine(); }],
        setCursor: [u => showCursor(u)],
      },
    }, buildData(0, 0, endNs), chartDiv);
    current = {level: 0, lo: -Infinity, hi: Infinity};

    for (const item of legendItems) {
      const val = el('span', {class: 'val'});
      legendVals.push({item, val});
      const box = el('input', {type: 'checkbox', checked: true});
      box.addEventListener('change', () => { for (const i of item.idx) chart.setSeries(i, {show: box.checked}); });
      legend.append(el('label', null, box,
        el('span', {class: 'swatch' + (item.dashed ? ' dashed' : ''), style: 'background:' + item.color + ';border-color:' + item.color}),
        item.label, val));
    }

    // Zoom, pan, click.
    function setWindow(lo, hi) {
      const minSpan = 1000;  // 1 us
      if (hi - lo < minSpan) { const mid = (lo + hi) / 2; lo = mid - minSpan / 2; hi = mid + minSpan / 2; }
      const span = hi - lo;
      if (span >= endNs) { lo = 0; hi = endNs; }
      else if (lo < 0) { lo = 0; hi = span; }
      else if (hi > endNs) { hi = endNs; lo = endNs - span; }
      chart.setScale('x', {min: lo / NS_PER_S, max: hi / NS_PER_S});
    }
    function view() { return [chart.scales.x.min * NS_PER_S, chart.scales.x.max * NS_PER_S]; }
    function pan(fraction) { const [lo, hi] = view(); const d = (hi - lo) * fraction; setWindow(lo + d, hi + d); }
    function zoomBy(factor, centerNs) {
      const [lo, hi] = view();
      const c = centerNs == null ? (lo + hi) / 2 : centerNs;
      setWindow(c - (c - lo) * factor, c + (hi - c) * factor);
    }
    const over = chart.over;
    over.addEventListener('wheel', e => {
      e.preventDefault();
      const c = chart.posToVal(e.offsetX, 'x') * NS_PER_S;
      zoomBy(e.deltaY < 0 ? 0.8 : 1.25, c);
    }, {passive: false});
    over.addEventListener('dblclick', () => setWindow(0, endNs));
    let downAt = null;
    // Shift-drag pans: caught before uPlot's own drag-to-zoom (capture on the chart's root).
    chart.root.addEventListener('mousedown', e => {
      downAt = {x: e.clientX, y: e.clientY};
      if (!e.shiftKey || !over.contains(e.target)) return;
      e.stopPropagation();
      e.preventDefault();
      const [lo, hi] = view();
      const nsPerPx = (hi - lo) / over.clientWidth;
      const x0 = e.clientX;
      const move = ev => { const d = (x0 - ev.clientX) * nsPerPx; setWindow(lo + d, hi + d); };
      const up = () => { window.removeEventListener('mousemove', move); window.removeEventListener('mouseup', up); };
      window.addEventListener('mousemove', move);
      window.addEventListener('mouseup', up);
    }, true);
    over.addEventListener('click', e => {
      if (!downAt || Math.abs(e.clientX - downAt.x) > 3 || Math.abs(e.clientY - downAt.y) > 3) return;
      // A click on the peak allocated's dot chooses the peak itself (the table then shows it exactly).
      const p = peaks.allocated;
      if (p && chart.series[1 + 2 * TOTALS.indexOf('allocated')].show &&
          Math.abs(e.offsetX - chart.valToPos(p.time_ns / NS_PER_S, 'x')) <= 8 &&
          Math.abs(e.offsetY - chart.valToPos(p.bytes, 'y')) <= 8) {
        timeline.onMoment(p.time_ns, 'peak');
        return;
      }
      timeline.onMoment(chart.posToVal(e.offsetX, 'x') * NS_PER_S);
    });

    // After a zoom or pan: switch to the level that fits the window, and hold the points around it.
    let refinePending = false;
    let windowText = '';
    function scheduleRefine() {
      if (refinePending) return;
      refinePending = true;
      Promise.resolve().then(() => { refinePending = false; refine(); });
    }
    function refine() {
      const [lo, hi] = view();
      const li = chooseLevel(lo, hi, chart.bbox.width / devicePixelRatio);
      const L = levels[li];
      const binText = L.bin_ns > 0 ? 'bins of ' + fmtTime(L.bin_ns) + ' (min–max)' : 'every change';
      windowText = fmtTimeAt(lo, (hi - lo) / 100) + ' – ' + fmtTimeAt(hi, (hi - lo) / 100) + ' · ' + binText;
      viewInfo.textContent = windowText;
      if (li === current.level && lo >= current.lo && hi <= current.hi) return;
      const span = hi - lo;
      const range = li === 0 ? {lo: -Infinity, hi: Infinity} : {lo: lo - span, hi: hi + span};
      current = {level: li, lo: range.lo, hi: range.hi};
      chart.setData(buildData(li, Math.max(0, range.lo), Math.min(endNs, range.hi)));
    }

    // Behind the series: iterations (boundaries and numbers) and their phases as bands.
    function drawBands(u) {
      if (!iterations.length) return;
      const ctx = u.ctx;
      const {left, top, width, height} = u.bbox;
      const lo = u.scales.x.min * NS_PER_S, hi = u.scales.x.max * NS_PER_S;
      const px = ns => u.valToPos(ns / NS_PER_S, 'x', true);
      ctx.save();
      ctx.textAlign = 'left';
      ctx.beginPath();
      ctx.rect(left, top, width, height);
      ctx.clip();
      const first = lowerBound(iterationEnds, lo);
      const dpr = devicePixelRatio;
      let lastLabelPx = -Infinity;
      for (let i = first; i < iterations.length && iterations[i].begin_ns <= hi; i++) {
        const s = iterations[i];
        const x0 = px(s.begin_ns), x1 = px(s.end_ns);
        const phases = s.phases || [];
        if (phases.length) {
          for (const p of phases) {
            const a = px(p.begin_ns), b = px(p.end_ns);
            if (b - a < 0.5) continue;
            ctx.fillStyle = PHASE_FILL[p.phase] || PHASE_FILL.other;
            ctx.fillRect(a, top, b - a, height);
          }
        } else if (i % 2 === 0) {
          ctx.fillStyle = 'rgba(148, 163, 184, 0.10)';
          ctx.fillRect(x0, top, x1 - x0, height);
        }
        if (x1 - x0 >= 2) {
          ctx.fillStyle = 'rgba(82, 96, 109, 0.35)';
          ctx.fillRect(Math.round(x0), top, Math.max(1, dpr), height);
        }
        if (x1 - x0 > 26 * dpr && x0 - lastLabelPx > 26 * dpr) {
          ctx.fillStyle = '#7b8794';
          ctx.font = (11 * dpr) + 'px system-ui, sans-serif';
          ctx.textBaseline = 'top';
          ctx.fillText(String(s.index), Math.max(left, x0) + 3 * dpr, top + 3 * dpr);
          lastLabelPx = x0;
        }
      }
      ctx.restore();
    }

    // Above the series: OOMs (red lines), the peaks (dots with their size) and the chosen moment.
    function drawMarkers(u) {
      const ctx = u.ctx;
      const {left, top, width, height} = u.bbox;
      const dpr = devicePixelRatio;
      const xpx = ns => u.valToPos(ns / NS_PER_S, 'x', true);
      const inside = x => x >= left - 1 && x <= left + width + 1;
      ctx.save();
      ctx.textAlign = 'left';
      ctx.beginPath();
      ctx.rect(left, top - 2 * dpr, width, height + 2 * dpr);
      ctx.clip();
      if (moment != null && inside(xpx(moment))) {
        const x = xpx(moment);
        ctx.strokeStyle = '#102a43';
        ctx.lineWidth = 1 * dpr;
        ctx.setLineDash([4 * dpr, 3 * dpr]);
        ctx.beginPath(); ctx.moveTo(x, top); ctx.lineTo(x, top + height); ctx.stroke();
        ctx.setLineDash([]);
      }
      for (const o of devOoms) {
        const x = xpx(o.time_ns);
        if (!inside(x)) continue;
        ctx.strokeStyle = COLORS.oom;
        ctx.lineWidth = 2 * dpr;
        ctx.beginPath(); ctx.moveTo(x, top); ctx.lineTo(x, top + height); ctx.stroke();
        ctx.fillStyle = COLORS.oom;
        ctx.beginPath();
        ctx.moveTo(x - 6 * dpr, top); ctx.lineTo(x + 6 * dpr, top); ctx.lineTo(x, top + 9 * dpr); ctx.closePath(); ctx.fill();
        ctx.font = 'bold ' + (11 * dpr) + 'px system-ui, sans-serif';
        ctx.textBaseline = 'top';
        const label = 'OOM';
        const w = ctx.measureText(label).width;
        ctx.fillText(label, x + 8 * dpr + w > left + width ? x - 8 * dpr - w : x + 8 * dpr, top + 2 * dpr);
      }
      for (const k of TOTALS.slice().reverse()) {
        const p = peaks[k];
        if (!p || !chart.series[1 + 2 * TOTALS.indexOf(k)].show) continue;
        const x = xpx(p.time_ns), y = u.valToPos(p.bytes, 'y', true);
        if (!inside(x)) continue;
        ctx.fillStyle = '#fff';
        ctx.strokeStyle = COLORS[k];
        ctx.lineWidth = 2 * dpr;
        ctx.beginPath(); ctx.arc(x, y, 4.5 * dpr, 0, 2 * Math.PI); ctx.fill(); ctx.stroke();
        if (k === 'allocated') {
          const label = 'peak allocated ' + fmtBytes(p.bytes);
          ctx.font = '600 ' + (12 * dpr) + 'px system-ui, sans-serif';
          ctx.textBaseline = 'bottom';
          const w = ctx.measureText(label).width;
          const tx = x + 8 * dpr + w > left + width ? x - 8 * dpr - w : x + 8 * dpr;
          ctx.fillStyle = 'rgba(255,255,255,0.85)';
          ctx.fillRect(tx - 2 * dpr, y - 18 * dpr, w + 4 * dpr, 15 * dpr);
          ctx.fillStyle = COLORS.allocated;
          ctx.fillText(label, tx, y - 4 * dpr);
        }
      }
      ctx.restore();
    }

    // The legend's values under the cursor (for a band: its bin's max, and its min where they differ).
    function showCursor(u) {
      const idx = u.cursor.idx;
      for (const {item, val} of legendVals) {
        if (idx == null) { val.textContent = ''; continue; }
        const hiV = valueAt(u.data[item.idx[0]], idx);
        const loV = item.idx.length > 1 ? valueAt(u.data[item.idx[1]], idx) : hiV;
        val.textContent = hiV == null ? '' : (loV != null && loV !== hiV ? fmtBytes(loV) + '–' : '') + fmtBytes(hiV);
      }
      const span = (u.scales.x.max - u.scales.x.min) * NS_PER_S;
      viewInfo.textContent = idx != null ? 'at ' + fmtTimeAt(u.data[0][idx] * NS_PER_S, span / 1000) : windowText;
    }
    function valueAt(col, idx) {
      for (let i = idx; i >= 0 && i > idx - 64; i--) if (col[i] != null) return col[i];
      return null;
    }

    const timeline = {
      chart, endNs, device: dev.device,
      markers: devOoms.length,
      zoomToNs(lo, hi) { setWindow(lo, hi); section.scrollIntoView({behavior: 'smooth', block: 'start'}); },
      setMoment(ns) { moment = ns; chart.redraw(false, false); },
      onMoment: () => {},
    };
    refine();
    return timeline;
  }

  function phaseKey() {
    const phases = new Set();
    for (const s of iterations) for (const p of s.phases || []) phases.add(p.phase);
    const key = el('div', {class: 'key'});
    for (const p of ['forward', 'backward', 'optimizer', 'other']) {
      if (phases.has(p)) key.append(el('span', null, el('span', {class: 'chip', style: 'background:' + PHASE_FILL[p].replace(/[\d.]+\)$/, '0.45)')}), p));
    }
    if (ooms.length) key.append(el('span', null, el('span', {class: 'chip', style: 'background:' + COLORS.oom}), 'OOM'));
    return key;
  }

  function hexAlpha(hex, alpha) {
    const n = parseInt(hex.slice(1), 16);
    return 'rgba(' + (n >> 16) + ',' + ((n >> 8) & 255) + ',' + (n & 255) + ',' + alpha + ')';
  }

  function chartWidth(section) { return Math.max(400, section.clientWidth - 36); }

  // ---- what was live at a moment, and the breakdown at the peak -----------------------------------------------
  function drawBelowChart(dev, section, timeline, level0) {
    const sites = dev.sites || [];
    const siteBytes = dev.site_bytes || [];
    const otherBytes = dev.other_site_bytes || [];
    const binNs = level0.bin_ns || 0;
    const ends = level0.t_ns.map(t => t + binNs);
    const head = el('h3');
    const body = el('div');
    const peak = dev.timeline.peaks && dev.timeline.peaks.allocated;
    const peakBtn = peak ? el('button', {type: 'button', onclick: () => show(peak.time_ns, 'peak')}, 'at the peak') : null;
    const left = el('div', null, el('div', {class: 'moment-head'}, head, peakBtn), body);
    const right = el('div');
    section.append(el('div', {class: 'below-chart'}, left, right));

    // The live bytes by call site at `ns`: exactly at the peak allocated where why is 'peak' (the data's figures
    // at the peak), else at the end of the coarse bin nearest `ns`.
    function show(ns, why) {
      const atPeak = why === 'peak' && peak && Array.isArray(dev.site_bytes_at_peak);
      let k = lowerBound(ends, ns);
      if (k >= ends.length || (k > 0 && ns - ends[k - 1] < ends[k] - ns)) k = Math.max(0, k - 1);
      const at = atPeak ? peak.time_ns : ends[k];
      timeline.setMoment(at);
      const t = v => fmtTimeAt(v, binNs);
      if (atPeak) {
        head.replaceChildren('Live by call site at ' + fmtTime(at), el('span', {class: 'sub'}, 'at the peak allocated, exactly'));
      } else {
        const near = why === 'peak' ? 'nearest the peak (the flame graph below is exact at the peak)' : 'nearest the click';
        head.replaceChildren('Live by call site at ' + t(at),
          el('span', {class: 'sub'}, (binNs > 0 ? 'end of the bin ' + t(at - binNs) + ' – ' + t(at) : 'the change') + ' ' + near));
      }
      const bytesOf = s => atPeak ? dev.site_bytes_at_peak[s] || 0 : (siteBytes[s] ? siteBytes[s][k] : 0);
      const rows = [];
      for (let s = 0; s < sites.length; s++) {
        const b = bytesOf(s);
        if (b > 0) rows.push({site: sites[s], bytes: b});
      }
      rows.sort((a, b) => b.bytes - a.bytes);
      const other = (atPeak ? dev.other_site_bytes_at_peak : otherBytes[k]) || 0;
      const total = rows.reduce((a, r) => a + r.bytes, 0) + other;
      if (!total) { body.replaceChildren(el('div', {class: 'empty'}, 'Nothing allocated was live then.')); return; }
      const shown = rows.slice(0, 15);
      const rest = rows.slice(15).reduce((a, r) => a + r.bytes, 0) + other;
      const max = Math.max(shown.length ? shown[0].bytes : 0, rest);
      const table = el('table', {class: 'moment-table'},
        el('thead', null, el('tr', null, el('th', null, 'call site'), el('th', {class: 'num'}, 'live'), el('th', null, ''))));
      const tb = el('tbody');
      for (const r of shown) {
        tb.append(el('tr', null, siteCell(r.site), el('td', {class: 'num', title: exactBytes(r.bytes)}, fmtBytes(r.bytes)),
          el('td', {style: 'width:22%'}, bar(r.bytes / max))));
      }
      if (rest > 0) {
        tb.append(el('tr', {class: 'other'}, el('td', null, 'all other call sites'),
          el('td', {class: 'num', title: exactBytes(rest)}, fmtBytes(rest)), el('td', null, bar(rest / max))));
      }
      tb.append(el('tr', {class: 'total'}, el('td', null, 'total allocated'), el('td', {class: 'num', title: exactBytes(total)}, fmtBytes(total)), el('td')));
      table.append(tb);
      body.replaceChildren(table);
    }
    timeline.onMoment = show;
    if (peak) show(peak.time_ns, 'peak'); else show(ends[ends.length - 1]);

    const breakdown = dev.breakdown_at_peak || [];
    if (breakdown.length) {
      const max = Math.max(...breakdown.map(b => b.bytes), 1);
      right.append(el('h3', null, 'What the peak is made of', peak ? el('span', {class: 'sub'}, 'at ' + fmtTime(peak.time_ns)) : null),
        el('div', {class: 'breakdown'}, ...breakdown.map(b => el('div', {class: 'row'},
          el('span', null, b.category), bar(b.bytes / max), el('span', {class: 'num', title: exactBytes(b.bytes)}, fmtBytes(b.bytes))))));
    }
    if (peak) {
      const facts = el('table', {class: 'peaks'}, el('thead', null, el('tr', null, el('th', null, 'peak'), el('th', {class: 'num'}, 'bytes'), el('th', {class: 'num'}, 'at'), el('th', {class: 'num'}, 'event'))));
      const tb = el('tbody');
      for (const k of TOTALS) {
        const p = dev.timeline.peaks[k];
        if (!p) continue;
        tb.append(el('tr', null, el('td', null, el('span', {class: 'chip', style: 'display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:6px;background:' + COLORS[k]}), k),
          el('td', {class: 'num', title: exactBytes(p.bytes)}, fmtBytes(p.bytes)),
          el('td', {class: 'num'}, el('a', {href: '#', onclick: e => { e.preventDefault(); const w = Math.max(endNsOf(timeline) / 50, 1e6); timeline.zoomToNs(p.time_ns - w, p.time_ns + w); show(p.time_ns); }}, fmtTime(p.time_ns))),
          el('td', {class: 'num'}, p.event != null ? fmtCount(p.event) : '')));
      }
      facts.append(tb);
      right.append(el('h3', {style: 'margin-top:14px'}, 'Peaks', el('span', {class: 'sub'}, 'click a time to zoom there')), facts);
    }
  }
  function endNsOf(timeline) { return timeline.endNs; }

  // ---- the flame graph (icicle) of what was live at the peak --------------------------------------------------
  function drawFlame(dev, section) {
    const flame = dev.flame_at_peak;
    if (!flame || !(flame.value > 0)) return;
    const peak = dev.timeline.peaks && dev.timeline.peaks.allocated;
    const div = el('div', {class: 'flame'});
    const details = el('div', {class: 'flame-details'}, 'hover a frame for its bytes; click to zoom into it');
    section.append(el('div', {class: 'flame-wrap'},
      el('h3', null, 'Live at the peak allocated, by call stack',
        el('span', {class: 'sub'}, (peak ? fmtBytes(peak.bytes) + ' at ' + fmtTime(peak.time_ns) + '; ' : '') + 'callers on top, native frames folded as the text reports fold them')),
      details, div));
    const total = flame.value;
    const factory = window.flamegraph.flamegraph || window.flamegraph.default;
    const chart = factory()
      .width(Math.max(400, section.clientWidth - 36))
      .cellHeight(20)
      .inverted(true)
      .sort(true)
      .minFrameSize(1)
      .transitionDuration(0)
      .title('')
      .setColorMapper((d, original) => frameColor(d))
      .setLabelHandler(d => d.data.name + ': ' + fmtBytes(d.data.value) + ' (' + (100 * d.data.value / total).toFixed(1) + '%)')
      .setDetailsElement(details);
    d3.select(div).datum(flame).call(chart);
    dev._flame = {chart, div, section};
    report.flameNodes += div.querySelectorAll('g').length;
  }
  function frameColor(d) {
    const name = d.data.name || '';
    if (d.depth === 0) return '#cbd2d9';
    const h = hash(name);
    if (name.startsWith('native:')) return 'hsl(' + (24 + h % 20) + ', 80%, ' + (68 + h % 8) + '%)';
    return 'hsl(' + (205 + h % 25) + ', 70%, ' + (70 + h % 10) + '%)';
  }
  function hash(s) { let h = 0; for (let i = 0; i < s.length; i++) h = (h * 31 + s.charCodeAt(i)) | 0; return Math.abs(h); }

  // ---- leaks, OOMs, traps, health -----------------------------------------------------------------------------
  function drawLeaks() {
    const box = byId('leaks');
    if (!leaks.length) { box.append(el('div', {class: 'empty'}, 'Nothing was live at exit.')); return; }
    const table = el('table', null, el('thead', null, el('tr', null, el('th', null, '#'), el('th', null, 'call site'),
      el('th', {class: 'num'}, 'live at exit'), el('th', {class: 'num'}, 'allocations'), el('th', {class: 'num'}, 'growth per iteration'))));
    const tb = el('tbody');
    const shownFirst = 10;  // the rest behind a button, so that the page reads at a glance
    leaks.forEach((l, i) => {
      const g = l.growth_per_iteration_bytes;
      tb.append(el('tr', {class: i >= shownFirst ? 'more' : null, hidden: i >= shownFirst}, el('td', {class: 'num muted'}, i + 1), siteCell(l),
        el('td', {class: 'num', title: exactBytes(l.live_bytes)}, fmtBytes(l.live_bytes)),
        el('td', {class: 'num'}, fmtCount(l.allocations)),
        el('td', {class: 'num' + (g > 0 ? ' grows' : ' muted'), title: g != null ? exactBytes(g) : 'not known (no iterations)'},
          g == null ? '—' : (g > 0 ? '+' : '') + fmtBytes(g) + (g > 0 ? ' per iteration' : ''))));
    });
    table.append(tb);
    box.append(table);
    if (leaks.length > shownFirst) {
      const more = el('button', {type: 'button', class: 'more-button', onclick: () => {
        for (const tr of tb.querySelectorAll('tr.more')) tr.hidden = false;
        more.remove();
      }}, 'show all ' + leaks.length);
      box.append(more);
    }
  }

  function drawOoms() {
    const box = byId('ooms');
    if (!ooms.length) { box.append(el('div', {class: 'empty'}, 'No allocation failed.')); return; }
    ooms.forEach((o, i) => {
      const timeline = timelines.find(t => t.device === o.device);
      const link = timeline ? el('a', {href: '#', onclick: e => {
        e.preventDefault();
        const w = Math.max(timeline.endNs / 40, 1e6);
        timeline.zoomToNs(o.time_ns - w, o.time_ns + w);
      }}, 'show on the chart') : null;
      box.append(el('div', {class: 'oom'},
        el('div', null, el('span', {class: 'when'}, 'OOM #' + (i + 1) + ': device ' + o.device + ' at ' + fmtTime(o.time_ns)),
          ', requested ', el('b', {title: exactBytes(o.requested_bytes)}, fmtBytes(o.requested_bytes)), ' · ', link),
        o.diagnosis ? diagnosisOf(o.diagnosis) : null));
    });
  }

  // `memtrace oom`'s diagnosis: "1. ... 2. ..." as a numbered list, other text as a paragraph.
  function diagnosisOf(text) {
    const parts = text.split(/\s+(?=\d+\. )/);
    const numbered = parts.length > 1 && parts.every((p, i) => p.startsWith((i + 1) + '. '));
    if (!numbered) return el('p', null, text);
    return el('ol', {class: 'diagnosis'}, ...parts.map((p, i) => el('li', null, p.slice(String(i + 1).length + 2))));
  }

  function drawTraps() {
    const box = byId('traps');
    if (!traps.length) { byId('traps-section').hidden = true; return; }
    for (const t of traps) box.append(el('div', {class: 'trap'}, el('div', {class: 'title'}, t.title), t.advice ? el('p', null, t.advice) : null));
  }

  function drawHealth() {
    const lines = trace.health || [];
    const box = byId('health');
    if (!lines.length) { box.append(el('div', {class: 'empty'}, 'No findings.')); return; }
    box.append(el('ul', {class: 'health'}, ...lines.map(l => el('li', null, l))));
  }

  // ---- many processes (`memtrace report A B C`, `report DIR/`) ----------------------------------------------------
  // The data of a fleet (docs/report.md, "The data of many processes"): times are ns since origin_unix_ns.
  const fleetCharts = [];  // {chart, section, markers}
  const MAX_MEMBER_LINES = 12;  // per-process lines on a combined chart: the rest are summed into one
  const MEMBER_HUES = [160, 330, 270, 100, 0, 190, 300, 45, 230, 120];  // away from allocated's blue and reserved's orange
  function memberColor(i) { return 'hsl(' + MEMBER_HUES[i % MEMBER_HUES.length] + ', 65%, ' + (38 + 12 * (Math.floor(i / MEMBER_HUES.length) % 3)) + '%)'; }

  function drawFleetPage() {
    const processes = data.processes || [];
    const gpus = data.gpus || [];
    const proc = i => (i != null && processes[i]) || null;
    const procLabel = i => {
      const p = proc(i);
      if (!p) return 'process ?';
      return (p.rank != null ? 'rank ' + p.rank + ' · ' : '') + 'pid ' + p.pid;
    };
    const gpuShort = k => 'GPU ' + k;
    for (const id of ['leaks-section', 'ooms-section', 'traps-section', 'health-section']) byId(id).hidden = true;

    drawFleetHeader(processes);
    drawFleetSummary(processes, gpus);
    const box = byId('devices');
    box.append(fleetProcesses(processes, gpus, procLabel));
    gpus.forEach((g, k) => fleetGpu(box, g, k, procLabel));
    box.append(fleetRanks(procLabel, gpuShort, gpus));
    box.append(fleetWrongDevices(procLabel, gpus));
    box.append(fleetLeaks(procLabel));
    report.charts = fleetCharts.length;
    report.series = fleetCharts.map(c => c.chart.series.length - 1);
    report.markers = fleetCharts.reduce((a, c) => a + c.markers, 0);
  }

  function fleetTitle(processes) {
    const jobs = new Set(processes.map(p => p.job_id).filter(j => j));
    return fmtCount(processes.length) + (processes.length === 1 ? ' process' : ' processes') +
      (jobs.size === 1 ? ' · job ' + [...jobs][0] : '');
  }

  function drawFleetHeader(processes) {
    const title = fleetTitle(processes);
    byId('title-command').textContent = title;
    document.title = 'memtrace: ' + title;
    const items = [];
    const hosts = [...new Set(processes.map(p => p.host || '?'))];
    items.push(el('span', null, (hosts.length === 1 ? 'on ' : hosts.length + ' hosts: ') + hosts.slice(0, 4).join(', ') + (hosts.length > 4 ? ', …' : '')));
    if (data.origin_unix_ns && data.origin_unix_ns !== '0') {
      const ms = Number(BigInt(data.origin_unix_ns) / 1000000n);
      items.push(el('span', null, 'first start ' + new Date(ms).toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC')));
    }
    const ends = processes.map(p => p.end_ns).filter(e => e != null);
    if (ends.length) items.push(el('span', null, fmtDuration(Math.max(...ends)) + ' from the first start to the last end'));
    const truncated = processes.filter(p => p.truncated).length;
    if (truncated) items.push(el('span', {class: 'warn'}, truncated + ' truncated ' + (truncated === 1 ? 'trace' : 'traces')));
    byId('trace-facts').append(...items);
  }

  function drawFleetSummary(processes, gpus) {
    const s = data.summary || {};
    const cards = [];
    const workers = processes.filter(p => p.parent != null).length;
    cards.push(card('', 'Processes', fmtCount(s.processes || 0), workers ? workers + ' under a traced parent' : (s.hosts || 0) + ' host' + (s.hosts === 1 ? '' : 's')));
    const names = [...new Set(gpus.map(g => g.name).filter(n => n))];
    cards.push(card('', 'GPUs', fmtCount(s.gpus || 0), names.join(', '), names.join(', ')));
    cards.push(card('', 'Ranks', fmtCount(s.ranks || 0), s.ranks ? 'spread ' + fmtBytes((data.ranks || {}).peak_allocated_spread_bytes) + ' of peak allocated' : 'no process has a rank'));
    const w = s.worst_rank;
    if (w) cards.push(card('allocated', 'Worst rank', 'rank ' + w.rank, fmtBytes(w.peak_allocated.bytes) + ' peak allocated' + (w.peak_allocated.time_ns != null ? ' at ' + fmtTime(w.peak_allocated.time_ns) : ''), exactBytes(w.peak_allocated.bytes)));
    const c = s.largest_combined_peak;
    if (c) cards.push(card('reserved', 'Largest combined peak', fmtBytes(c.allocated_bytes), 'allocated on GPU ' + c.gpu + (c.time_ns != null ? ' at ' + fmtTime(c.time_ns) : ''), exactBytes(c.allocated_bytes)));
    else cards.push(card('reserved', 'Largest combined peak', '—', 'no GPU was shared by traced processes'));
    if (s.wrong_devices) cards.push(card('bad', 'Wrong device', fmtCount(s.wrong_devices), 'allocated on a GPU not their rank\'s'));
    byId('summary').append(...cards);
  }

  function panel(id, title, sub) {
    return el('section', {class: 'panel', id}, el('h2', null, title, sub ? el('span', {class: 'sub'}, sub) : null));
  }
  function bytesCell(bytes) { return el('td', {class: 'num', title: exactBytes(bytes)}, fmtBytes(bytes)); }

  // The processes as a tree: children indented under their traced parent (data.tree is the order).
  function fleetProcesses(processes, gpus, procLabel) {
    const section = panel('fleet-processes', 'Processes', 'children under their traced parent; peaks per GPU');
    const table = el('table', null, el('thead', null, el('tr', null, el('th', null, 'process'), el('th', {class: 'num'}, 'rank'),
      el('th', null, 'host'), el('th', null, 'GPU'), el('th', {class: 'num'}, 'peak allocated'), el('th', {class: 'num'}, 'peak reserved'),
      el('th', {class: 'num'}, 'leaked'), el('th', {class: 'num'}, 'OOMs'))));
    const tb = el('tbody');
    for (const node of data.tree || []) {
      const p = proc(node.process);
      if (!p) continue;
      const devs = p.devices || [];
      const lines = f => devs.length ? devs.map(d => el('div', null, f(d))) : [el('span', {class: 'muted'}, '—')];
      const name = el('td', {class: 'process', style: 'padding-left:' + (8 + 18 * Math.min(node.depth || 0, 12)) + 'px', title: p.trace},
        node.depth ? el('span', {class: 'muted'}, '└ ') : null, el('b', null, 'pid ' + p.pid), ' ',
        el('span', {class: 'mono'}, p.command || p.trace));
      tb.append(el('tr', {class: 'process-row'}, name, el('td', {class: 'num'}, p.rank != null ? p.rank : '—'), el('td', null, p.host),
        el('td', null, ...lines(d => (d.gpu_index != null ? 'GPU ' + d.gpu_index + ' · ' : '') + 'cuda:' + d.ordinal)),
        el('td', {class: 'num'}, ...lines(d => el('span', {title: exactBytes(d.peak_allocated.bytes)}, fmtBytes(d.peak_allocated.bytes)))),
        el('td', {class: 'num'}, ...lines(d => el('span', {title: exactBytes(d.peak_reserved.bytes)}, fmtBytes(d.peak_reserved.bytes)))),
        el('td', {class: 'num' + (p.leaked_bytes > 0 ? ' grows' : ' muted'), title: exactBytes(p.leaked_bytes)}, p.leaked_bytes > 0 ? fmtBytes(p.leaked_bytes) : '—'),
        el('td', {class: 'num' + (p.ooms > 0 ? ' grows' : ' muted')}, p.ooms > 0 ? fmtCount(p.ooms) : '—')));
    }
    table.append(tb);
    section.append(table);
    return section;
    function proc(i) { return (i != null && processes[i]) || null; }
  }

  // One GPU: its users with their peaks, untraced memory, and the combined timeline where there is one.
  // The card is in the page before its chart is made, so that the chart takes the card's width.
  function fleetGpu(box, g, k, procLabel) {
    const section = el('section', {class: 'panel gpu', id: 'gpu-' + k});
    box.append(section);
    section.append(el('h2', null, 'GPU ' + k + (g.name ? ' · ' + g.name : ''),
      el('span', {class: 'total'}, [g.gpu || 'no UUID', g.host, g.total_bytes ? fmtBytes(g.total_bytes) + ' total' : ''].filter(x => x).join(' · '))));
    const table = el('table', {class: 'users'}, el('thead', null, el('tr', null, el('th', null, 'process'), el('th', {class: 'num'}, 'as'),
      el('th', {class: 'num'}, 'peak allocated'), el('th', {class: 'num'}, 'when'), el('th', {class: 'num'}, 'peak reserved'), el('th', {class: 'num'}, 'when'))));
    const tb = el('tbody');
    for (const u of g.users || []) {
      tb.append(el('tr', {class: 'user-row'}, el('td', null, procLabel(u.process)), el('td', {class: 'num'}, 'cuda:' + u.ordinal),
        bytesCell(u.peak_allocated.bytes), el('td', {class: 'num'}, fmtTime(u.peak_allocated.time_ns)),
        bytesCell(u.peak_reserved.bytes), el('td', {class: 'num'}, fmtTime(u.peak_reserved.time_ns))));
    }
    if ((g.users || []).length > 1) {
      tb.append(el('tr', {class: 'total'}, el('td', null, 'sum of the peaks'), el('td'), bytesCell(g.sum_of_peak_allocated_bytes), el('td', {class: 'num muted'}, 'upper bound'),
        bytesCell(g.sum_of_peak_reserved_bytes), el('td')));
    }
    table.append(tb);
    section.append(table);
    const u = g.untraced;
    if (u && u.bytes > 0) {
      section.append(el('div', {class: 'untraced'}, el('b', null, 'Untraced processes'), ' held ',
        el('b', {title: exactBytes(u.bytes)}, fmtBytes(u.bytes)), ' at ' + fmtTime(u.time_ns) + ' (NVML, as ' + procLabel(u.seen_by) + ' saw it)',
        (u.pids || []).length ? '; NVML names pid ' + u.pids.join(', ') : '; NVML did not name them'));
    }
    if (g.combined) fleetCombined(g, section, procLabel);
  }

  // The combined timeline: allocated and reserved summed over the GPU's processes, one line per process, the
  // combined peak marked, and who held what then.
  function fleetCombined(g, section, procLabel) {
    const c = g.combined;
    const pts = c.points || {};
    const members = c.members || [];
    const memberCols = pts.member_allocated_bytes || [];
    const peak = c.peak_allocated;
    // A line per process, for the MAX_MEMBER_LINES that held most at the combined peak; the others as one line.
    const byShare = members.map((m, j) => j);
    const share = j => ((peak && peak.member_allocated_bytes) || [])[j] || 0;
    byShare.sort((a, b) => share(b) - share(a) || a - b);
    const lined = members.length > MAX_MEMBER_LINES ? byShare.slice(0, MAX_MEMBER_LINES - 1) : byShare.sort((a, b) => a - b);
    const rest = members.length > MAX_MEMBER_LINES ? byShare.slice(MAX_MEMBER_LINES - 1) : [];
    const xs = [], cols = [[], [], ...lined.map(() => []), ...(rest.length ? [[]] : [])];
    const at = (j, i) => (memberCols[j] ? memberCols[j][i] : null);
    (pts.t_ns || []).forEach((t, i) => {
      if (t == null) return;
      xs.push(t / NS_PER_S);
      cols[0].push(pts.allocated_bytes[i]);
      cols[1].push(pts.reserved_bytes[i]);
      lined.forEach((j, k) => cols[2 + k].push(at(j, i)));
      if (rest.length) cols[2 + lined.length].push(rest.some(j => at(j, i) == null) ? null : rest.reduce((a, j) => a + at(j, i), 0));
    });
    section.append(el('h3', {style: 'margin-top:14px'}, 'Combined memory of the GPU',
      el('span', {class: 'sub'}, 'the sum over its traced processes on the wall clock' +
        (c.changes > xs.length ? '; ' + fmtCount(c.changes) + ' changes drawn as the maxima of ' + fmtCount(xs.length) + ' intervals' : '') +
        (memberCols.length ? '' : '; per-process lines not kept (the series was thinned)'))));
    if (!xs.length) { section.append(el('div', {class: 'empty'}, 'No combined points.')); return; }
    const legendItems = [{label: 'combined allocated', color: COLORS.allocated, width: 2.2},
                         {label: 'combined reserved', color: COLORS.reserved, width: 1.6}]
      .concat(lined.map((j, k) => ({label: procLabel(members[j]) + ' allocated', color: memberColor(k), width: 1.2, dash: [4, 3]})))
      .concat(rest.length ? [{label: rest.length + ' other processes allocated', color: '#9aa5b1', width: 1.2, dash: [2, 3]}] : []);
    const series = [{}].concat(legendItems.map(s => ({label: s.label, stroke: s.color, width: s.width, dash: s.dash,
      paths: uPlot.paths.stepped({align: 1}), spanGaps: false, points: {show: false}})));
    const legend = el('div', {class: 'legend'});
    const viewInfo = el('span', {class: 'view-info'});
    const chartDiv = el('div', {class: 'chart'});
    section.append(el('div', {class: 'toolbar'}, viewInfo), legend, chartDiv);
    const vals = legendItems.map(() => el('span', {class: 'val'}));
    const chart = new uPlot({
      width: chartWidth(section), height: 320, legend: {show: false},
      cursor: {drag: {x: true, y: false, setScale: true}, points: {show: false}},
      scales: {x: {time: false}, y: {range: (u, min, max) => [0, max > 0 ? max * 1.12 : 1]}},
      axes: [
        {space: 90, incrs: TIME_INCRS, values: (u, splits, ax, space, incr) => splits.map(v => fmtAxisSeconds(v, incr)), grid: {stroke: '#eef2f6'}},
        {size: 76, space: 36, incrs: BYTE_INCRS, values: (u, splits, ax, space, incr) => splits.map(v => fmtAxisBytes(v, incr)), grid: {stroke: '#eef2f6'}},
      ],
      series,
      hooks: {
        draw: [u => drawPeak(u)],
        setCursor: [u => {
          const idx = u.cursor.idx;
          vals.forEach((v, j) => { const y = idx == null ? null : u.data[1 + j][idx]; v.textContent = y == null ? '' : fmtBytes(y); });
          viewInfo.textContent = idx == null ? 'drag to zoom, double-click to reset' : 'at ' + fmtTime(u.data[0][idx] * NS_PER_S);
        }],
      },
    }, [xs, ...cols], chartDiv);
    viewInfo.textContent = 'drag to zoom, double-click to reset';
    legendItems.forEach((item, j) => {
      const box = el('input', {type: 'checkbox', checked: true});
      box.addEventListener('change', () => chart.setSeries(1 + j, {show: box.checked}));
      legend.append(el('label', null, box, el('span', {class: 'swatch' + (item.dash ? ' dashed' : ''), style: 'background:' + item.color + ';border-color:' + item.color}), item.label, vals[j]));
    });
    // The combined peak allocated: a line at its moment and a dot on the combined allocated, labelled.
    function drawPeak(u) {
      if (!peak || peak.time_ns == null || !u.series[1].show) return;
      const ctx = u.ctx, dpr = devicePixelRatio;
      const x = u.valToPos(peak.time_ns / NS_PER_S, 'x', true), y = u.valToPos(peak.allocated_bytes, 'y', true);
      const {left, top, width, height} = u.bbox;
      if (x < left || x > left + width) return;
      ctx.save();
      ctx.strokeStyle = COLORS.allocated;
      ctx.setLineDash([3 * dpr, 3 * dpr]);
      ctx.beginPath(); ctx.moveTo(x, top); ctx.lineTo(x, top + height); ctx.stroke();
      ctx.setLineDash([]);
      ctx.fillStyle = '#fff'; ctx.lineWidth = 2 * dpr;
      ctx.beginPath(); ctx.arc(x, y, 4.5 * dpr, 0, 2 * Math.PI); ctx.fill(); ctx.stroke();
      const label = 'combined peak ' + fmtBytes(peak.allocated_bytes);
      ctx.font = '600 ' + (12 * dpr) + 'px system-ui, sans-serif';
      const w = ctx.measureText(label).width;
      const tx = x + 8 * dpr + w > left + width ? x - 8 * dpr - w : x + 8 * dpr;
      ctx.fillStyle = COLORS.allocated; ctx.textBaseline = 'bottom';
      ctx.fillText(label, tx, Math.max(top + 14 * dpr, y - 4 * dpr));
      ctx.restore();
    }
    chart.over.title = peak ? 'combined peak allocated ' + fmtBytes(peak.allocated_bytes) + ' at ' + fmtTime(peak.time_ns) : '';
    fleetCharts.push({chart, section, markers: peak ? 1 : 0});
    if (peak) {
      const table = el('table', {class: 'at-peak'}, el('thead', null, el('tr', null, el('th', null, 'at the combined peak allocated, ' + fmtTime(peak.time_ns)),
        el('th', {class: 'num'}, 'allocated'), el('th', {class: 'num'}, 'reserved'), el('th', null, ''))));
      const tb = el('tbody');
      members.forEach((m, j) => {
        const a = (peak.member_allocated_bytes || [])[j], r = (peak.member_reserved_bytes || [])[j];
        const k = lined.indexOf(j);
        tb.append(el('tr', {class: 'held-row'}, el('td', null, el('span', {class: 'swatch', style: 'display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:6px;background:' + (k >= 0 ? memberColor(k) : '#9aa5b1')}), procLabel(m)),
          bytesCell(a), bytesCell(r), el('td', {style: 'width:30%'}, bar(peak.allocated_bytes ? (a || 0) / peak.allocated_bytes : 0))));
      });
      tb.append(el('tr', {class: 'total'}, el('td', null, 'the GPU'), bytesCell(peak.allocated_bytes), bytesCell(peak.reserved_bytes), el('td')));
      table.append(tb);
      section.append(el('h3', {style: 'margin-top:12px'}, 'Who held what at the combined peak'), table);
    }
  }

  function fleetRanks(procLabel, gpuShort, gpus) {
    const ranks = data.ranks || {};
    const rows = ranks.rows || [];
    const section = panel('fleet-ranks', 'Ranks', rows.length ? 'the worst rank highlighted' : '');
    if (!rows.length) { section.append(el('div', {class: 'empty'}, 'No process has a rank.')); return section; }
    const table = el('table', null, el('thead', null, el('tr', null, el('th', {class: 'num'}, 'rank'), el('th', null, 'process'), el('th', null, 'GPU'),
      el('th', {class: 'num'}, 'peak allocated'), el('th', {class: 'num'}, 'when'), el('th', {class: 'num'}, 'peak reserved'),
      el('th', {class: 'num'}, 'leaked'), el('th', {class: 'num'}, 'OOMs'))));
    const tb = el('tbody');
    rows.forEach((r, i) => {
      const k = gpus.findIndex(g => g.gpu && g.gpu === r.gpu);
      tb.append(el('tr', {class: 'rank-row' + (i === ranks.worst ? ' worst' : '')}, el('td', {class: 'num'}, r.rank),
        el('td', null, procLabel(r.process), i === ranks.worst ? el('span', {class: 'worst-tag'}, 'worst') : null),
        el('td', {title: r.gpu}, (k >= 0 ? gpuShort(k) + ' · ' : '') + 'cuda:' + r.ordinal),
        bytesCell(r.peak_allocated.bytes), el('td', {class: 'num'}, fmtTime(r.peak_allocated.time_ns)), bytesCell(r.peak_reserved.bytes),
        el('td', {class: 'num' + (r.leaked_bytes > 0 ? ' grows' : ' muted'), title: exactBytes(r.leaked_bytes)}, r.leaked_bytes > 0 ? fmtBytes(r.leaked_bytes) : '—'),
        el('td', {class: 'num' + (r.ooms > 0 ? ' grows' : ' muted')}, r.ooms > 0 ? fmtCount(r.ooms) : '—')));
    });
    table.append(tb);
    section.append(table, el('div', {class: 'rank-figures'},
      el('span', {title: exactBytes(ranks.peak_allocated_spread_bytes)}, 'spread of peak allocated ' + fmtBytes(ranks.peak_allocated_spread_bytes)),
      el('span', {title: exactBytes(ranks.peak_reserved_spread_bytes)}, 'spread of peak reserved ' + fmtBytes(ranks.peak_reserved_spread_bytes)),
      el('span', {title: exactBytes(ranks.median_peak_allocated_bytes)}, 'median peak allocated ' + fmtBytes(ranks.median_peak_allocated_bytes))));
    return section;
  }

  function fleetWrongDevices(procLabel, gpus) {
    const wrong = data.wrong_devices || [];
    const section = panel('fleet-wrong', 'Wrong devices', 'allocations on a GPU that is not the rank\'s local device');
    if (!wrong.length) { section.append(el('div', {class: 'empty'}, 'Every rank stayed on its own device.')); return section; }
    for (const w of wrong) {
      const k = gpus.findIndex(g => g.gpu && g.gpu === w.gpu);
      section.append(el('div', {class: 'oom wrong-device'},
        el('span', {class: 'when'}, 'WRONG DEVICE: '), procLabel(w.process) + ' allocated ', el('b', {title: exactBytes(w.peak_allocated_bytes)}, fmtBytes(w.peak_allocated_bytes)),
        ' (its peak) on cuda:' + w.ordinal + (k >= 0 ? ' (GPU ' + k + ')' : '') + '; its own device is cuda:' + w.local_ordinal + '.',
        el('p', null, 'First allocation there' + (w.first_allocation_ns != null ? ' at ' + fmtTime(w.first_allocation_ns) : '') + ': ',
          el('code', null, w.first_allocation_site || 'no call site recorded'))));
    }
    return section;
  }

  function fleetLeaks(procLabel) {
    const leaks = data.leaks || [];
    const section = panel('fleet-leaks', 'Leak candidates', 'live at exit, merged by call site across processes');
    if (!leaks.length) { section.append(el('div', {class: 'empty'}, 'Nothing was live at exit.')); return section; }
    const table = el('table', null, el('thead', null, el('tr', null, el('th', null, 'call site'), el('th', {class: 'num'}, 'live at exit'),
      el('th', {class: 'num'}, 'allocations'), el('th', null, 'processes'))));
    const tb = el('tbody');
    for (const l of leaks) {
      tb.append(el('tr', {class: 'leak-row'}, el('td', {class: 'site', title: l.site_key}, l.site || l.site_key),
        bytesCell(l.bytes), el('td', {class: 'num'}, fmtCount(l.count)),
        el('td', null, (l.processes || []).map(procLabel).join(', '))));
    }
    table.append(tb);
    section.append(table);
    return section;
  }

  // ---- resizing -----------------------------------------------------------------------------------------------
  let resizeTimer = null;
  window.addEventListener('resize', () => {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(() => {
      for (const t of timelines) t.chart.setSize({width: chartWidth(t.chart.root.closest('section')), height: 340});
      for (const c of fleetCharts) c.chart.setSize({width: chartWidth(c.section), height: 320});
      for (const dev of devices) {
        if (!dev._flame) continue;
        dev._flame.chart.width(Math.max(400, dev._flame.section.clientWidth - 36));
        dev._flame.chart.update();
      }
    }, 150);
  });

  if (data.kind === 'fleet') {
    drawFleetPage();
  } else {
    drawHeader();
    drawSummary();
    devices.forEach(drawDevice);
    if (!devices.length) byId('devices').append(el('section', {class: 'panel'}, el('div', {class: 'empty'}, 'The trace has no device memory events.')));
    drawLeaks();
    drawOoms();
    drawTraps();
    drawHealth();
    report.charts = timelines.length;
    report.markers = timelines.reduce((a, t) => a + t.markers, 0);
    report.series = timelines.map(t => t.chart.series.length - 1);
  }
  // Ready once the browser has painted what was drawn (d3's label transitions run on the next frame).
  requestAnimationFrame(() => requestAnimationFrame(() => {
    report.drawnMs = Math.round(performance.now());
    report.ready = true;
  }));
})();
