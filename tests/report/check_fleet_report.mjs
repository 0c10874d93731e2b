// check_fleet_report.mjs: what check_report.mjs checks on the page of many processes (`memtrace report A B C`,
// data "kind": "fleet", docs/report.md). Each count is worked out from the embedded data, independently of the
// page: the title; the summary cards; the Processes table's rows in tree order, each child indented deeper than
// its parent; per GPU a card with a row per user and the untraced processes' pids; a chart per GPU with a combined
// timeline (uPlot canvas with ink on it, 2 + one series per process up to 12, the combined peak marked) and its "who held
// what" rows adding up to the combined peak; the Ranks rows with the worst one highlighted; a WRONG DEVICE
// callout per wrong device, its call site as text; the merged leak rows. Then a drag-zoom, a hover (the legend
// shows values) and a double-click on each chart, and the screenshot.

export function fleetTitle(data) {
  const processes = data.processes || [];
  const jobs = new Set(processes.map(p => p.job_id).filter(j => j));
  return processes.length.toLocaleString('en-US') + (processes.length === 1 ? ' process' : ' processes') +
    (jobs.size === 1 ? ' · job ' + [...jobs][0] : '');
}

export async function checkFleetPage(page, data, check, screenshotPath) {
  const processes = data.processes || [];
  const gpus = data.gpus || [];
  const charted = gpus.filter(g => g.combined && (g.combined.points.t_ns || []).some(t => t != null));
  const ranks = data.ranks || {rows: []};
  const drawn = await page.evaluate(() => {
    const texts = sel => Array.from(document.querySelectorAll(sel)).map(e => e.textContent);
    return {
      report: window.memtraceReport,
      title: document.title,
      cards: texts('#summary .card .label'),
      processRows: Array.from(document.querySelectorAll('#fleet-processes tbody tr')).map(tr => ({
        text: tr.cells[0].textContent, pad: parseFloat(tr.cells[0].style.paddingLeft)})),
      gpuCards: Array.from(document.querySelectorAll('section.gpu')).map(s => ({
        users: s.querySelectorAll('tr.user-row').length,
        untraced: (s.querySelector('.untraced') || {}).textContent || '',
        held: Array.from(s.querySelectorAll('tr.held-row td.num:nth-child(2)')).map(td => td.title),
        total: (s.querySelector('table.at-peak tr.total td.num') || {}).title || null,
        canvases: s.querySelectorAll('.uplot canvas').length,
        // Ink on the chart: pixels of the plot that are not blank.
        ink: Array.from(s.querySelectorAll('.uplot canvas')).map(c => {
          const ctx = c.getContext('2d');
          const px = ctx.getImageData(0, 0, c.width, c.height).data;
          let n = 0;
          for (let i = 3; i < px.length; i += 4) if (px[i] > 0) n++;
          return n;
        }),
      })),
      rankRows: document.querySelectorAll('#fleet-ranks tbody tr.rank-row').length,
      worstRows: Array.from(document.querySelectorAll('#fleet-ranks tbody tr.rank-row'))
        .map((tr, i) => tr.classList.contains('worst') ? i : -1).filter(i => i >= 0),
      wrong: texts('#fleet-wrong .wrong-device'),
      wrongSites: texts('#fleet-wrong .wrong-device code'),
      leakRows: texts('#fleet-leaks tbody tr.leak-row td.site'),
      bold: Array.from(document.querySelectorAll('b')).filter(b => b.textContent === 'bold').length,
    };
  });
  const r = drawn.report;
  check(drawn.title === 'memtrace: ' + fleetTitle(data), `title: ${JSON.stringify(drawn.title)}, expected "memtrace: ${fleetTitle(data)}"`);
  const cards = ['Processes', 'GPUs', 'Ranks', 'Largest combined peak']
    .concat((data.summary || {}).worst_rank ? ['Worst rank'] : []);
  for (const c of cards) check(drawn.cards.some(t => t.toLowerCase() === c.toLowerCase()), `no summary card "${c}" (cards: ${JSON.stringify(drawn.cards)})`);

  // The tree: rows in data.tree's order, each child indented deeper than its parent's row.
  const tree = (data.tree || []).filter(n => processes[n.process]);
  check(drawn.processRows.length === tree.length, `process rows: ${drawn.processRows.length}, expected ${tree.length}`);
  const rowOf = new Map(tree.map((n, i) => [n.process, i]));
  tree.forEach((n, i) => {
    const row = drawn.processRows[i];
    if (!row) return;
    const p = processes[n.process];
    check(row.text.includes('pid ' + p.pid) && row.text.includes(p.command || p.trace),
          `process row ${i}: ${JSON.stringify(row.text)}, expected pid ${p.pid} and its command`);
    if (p.parent != null && rowOf.has(p.parent) && n.depth > 0) {
      const parentRow = drawn.processRows[rowOf.get(p.parent)];
      check(rowOf.get(p.parent) < i && row.pad > parentRow.pad,
            `pid ${p.pid} is not indented under its parent pid ${processes[p.parent].pid}`);
    }
  });

  check(drawn.gpuCards.length === gpus.length, `GPU cards: ${drawn.gpuCards.length}, expected ${gpus.length}`);
  gpus.forEach((g, k) => {
    const c = drawn.gpuCards[k];
    if (!c) return;
    check(c.users === g.users.length, `GPU ${k}: ${c.users} user rows, expected ${g.users.length}`);
    if (g.untraced && g.untraced.bytes > 0) {
      check(c.untraced.startsWith('Untraced processes') && g.untraced.pids.every(pid => c.untraced.includes(String(pid))),
            `GPU ${k}: untraced memory ${JSON.stringify(c.untraced)}, expected pids ${g.untraced.pids}`);
    }
    const chartedHere = charted.includes(g);
    check(c.canvases === (chartedHere ? 1 : 0), `GPU ${k}: ${c.canvases} charts, expected ${chartedHere ? 1 : 0}`);
    if (chartedHere) {
      check(c.ink.every(n => n > 1000), `GPU ${k}: the chart is blank (${c.ink} pixels drawn)`);
      const peak = g.combined.peak_allocated;
      const held = c.held.map(t => Number(t.replace(/[^0-9]/g, '')));
      check(JSON.stringify(held) === JSON.stringify(peak.member_allocated_bytes),
            `GPU ${k}: who held what at the combined peak ${JSON.stringify(held)}, expected ${JSON.stringify(peak.member_allocated_bytes)}`);
      check(c.total != null && Number(c.total.replace(/[^0-9]/g, '')) === peak.allocated_bytes,
            `GPU ${k}: the combined peak's total ${c.total}, expected ${peak.allocated_bytes} B`);
    }
  });
  check(r.charts === charted.length, `charts: page says ${r.charts}, the data has ${charted.length} combined timelines`);
  // A line per process, at most 12 (11 and one of the others summed, where there are more).
  const series = charted.map(g => 2 + Math.min(g.combined.members.length, 12));
  check(JSON.stringify(r.series) === JSON.stringify(series), `series per chart: ${JSON.stringify(r.series)}, expected ${JSON.stringify(series)}`);
  check(r.markers === charted.filter(g => g.combined.peak_allocated.time_ns != null).length,
        `combined peaks marked: ${r.markers}`);

  check(drawn.rankRows === ranks.rows.length, `rank rows: ${drawn.rankRows}, expected ${ranks.rows.length}`);
  const worst = ranks.worst == null ? [] : [ranks.worst];
  check(JSON.stringify(drawn.worstRows) === JSON.stringify(worst), `worst rank rows: ${JSON.stringify(drawn.worstRows)}, expected ${JSON.stringify(worst)}`);
  const wrong = data.wrong_devices || [];
  check(drawn.wrong.length === wrong.length && drawn.wrong.every(t => t.startsWith('WRONG DEVICE')),
        `wrong device callouts: ${drawn.wrong.length}, expected ${wrong.length}`);
  check(JSON.stringify(drawn.wrongSites) === JSON.stringify(wrong.map(w => w.first_allocation_site || 'no call site recorded')),
        `wrong device call sites as text: ${JSON.stringify(drawn.wrongSites)}`);
  const leaks = data.leaks || [];
  check(JSON.stringify(drawn.leakRows) === JSON.stringify(leaks.map(l => l.site || l.site_key)),
        `leak rows: ${JSON.stringify(drawn.leakRows)}, expected the data's sites`);
  check(drawn.bold === 0, `${drawn.bold} <b>bold</b> elements: text from a trace became HTML`);

  await page.screenshot({path: screenshotPath, fullPage: true});
  // Use each chart: drag to zoom (the x scale narrows), hover (the legend shows values), double-click (reset).
  for (let i = 0; i < charted.length; i++) {
    const over = page.locator('section.gpu .uplot .u-over').nth(i);
    await over.scrollIntoViewIfNeeded();
    const box = await over.boundingBox();
    const before = await page.evaluate(n => {
      const u = document.querySelectorAll('section.gpu .uplot')[n];
      return u ? u.querySelectorAll('canvas').length : 0;
    }, i);
    await page.mouse.move(box.x + box.width * 0.3, box.y + box.height / 2);
    await page.mouse.down();
    await page.mouse.move(box.x + box.width * 0.6, box.y + box.height / 2, {steps: 5});
    await page.mouse.up();
    await page.mouse.move(box.x + box.width * 0.45, box.y + box.height / 2);
    const vals = await page.locator('section.gpu').filter({has: page.locator('.uplot')}).nth(i)
      .locator('.legend .val').allTextContents();
    check(before === 1 && vals.length === series[i] && vals.slice(0, 2).every(v => /\d/.test(v)),
          `chart ${i}: after a zoom and a hover the legend shows ${JSON.stringify(vals)}`);
    await page.mouse.dblclick(box.x + box.width * 0.45, box.y + box.height / 2);
  }
}
