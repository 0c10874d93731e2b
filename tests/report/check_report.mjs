// check_report.mjs: opens a `memtrace report` page in headless Chromium (Debian's /usr/bin/chromium, driven by
// playwright-core from web/node_modules) and checks that it draws what its embedded data says.
//
//   node check_report.mjs REPORT.html SCREENSHOT.png [--max-bytes N]
//
// Fails (exit 1, one line per failure) on: a console error, a page error, any request other than the file itself,
// the page not ready within 60 s, a drawn count that differs from the one the data gives (charts and their uPlot
// canvases, series per chart, OOM markers, leak/OOM/trap/health rows, the title), no flame graph nodes where the
// data has a flame graph, an <img> element (text from the trace must stay text), a zoom, click, wheel or resize
// that breaks the page, an "at the peak" table whose total is not the peak allocated, or a report larger than
// --max-bytes; for the data of many processes, what check_fleet_report.mjs checks instead of the single trace's
// counts and interactions. Prints the report's size and its load-to-ready time, and saves a full-page screenshot.
import fs from 'node:fs';
import path from 'node:path';
import {fileURLToPath, pathToFileURL} from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, '..', '..');
const chromiumPath = process.env.MEMTRACE_CHROMIUM || '/usr/bin/chromium';

function usage() {
  console.error('usage: node check_report.mjs REPORT.html SCREENSHOT.png [--max-bytes N]');
  process.exit(2);
}

const args = process.argv.slice(2);
if (args.length < 2) usage();
const [reportPath, screenshotPath] = args;
let maxBytes = null;
for (let i = 2; i < args.length; i++) {
  if (args[i] === '--max-bytes' && i + 1 < args.length) maxBytes = Number(args[++i]);
  else usage();
}

const failures = [];
function check(ok, what) { if (!ok) failures.push(what); }

// The data the page embeds, read here independently of the page: what it must draw.
const html = fs.readFileSync(reportPath, 'utf8');
const sizeBytes = fs.statSync(reportPath).size;
const open = '<script id="memtrace-data" type="application/json">';
const start = html.indexOf(open);
if (start < 0) {
  console.error(`check_report: ${reportPath}: no <script id="memtrace-data"> element`);
  process.exit(1);
}
const end = html.indexOf('</script>', start);
const data = JSON.parse(html.slice(start + open.length, end));
const devicesWithTimeline = (data.devices || []).filter(d =>
  ((d.timeline && d.timeline.levels) || []).some(l => l.t_ns && l.t_ns.length));
const chartDevices = new Set(devicesWithTimeline.map(d => d.device));
const sampledKeys = ['device_used', 'process_used', 'other_processes'];
const expected = {
  charts: devicesWithTimeline.length,
  series: devicesWithTimeline.map(d => 6 + sampledKeys.filter(k => (d.timeline[k] || []).length).length),
  markers: (data.ooms || []).filter(o => chartDevices.has(o.device)).length,
  flame: (data.devices || []).some(d => d.flame_at_peak && d.flame_at_peak.value > 0),
  leaks: (data.leaks || []).length,
  ooms: (data.ooms || []).length,
  traps: (data.traps || []).length,
  health: ((data.trace || {}).health || []).length,
};

// The page of one trace: what it draws against the data, then zoom, click, wheel, "at the peak" and a resize.
async function checkTracePage(page, drawn) {
  const r = drawn.report;
  check(r.charts === expected.charts, `charts: page says ${r.charts}, the data has ${expected.charts} devices with a timeline`);
  check(drawn.canvases === expected.charts, `uPlot canvases: ${drawn.canvases}, expected ${expected.charts}`);
  check(JSON.stringify(r.series) === JSON.stringify(expected.series),
        `series per chart: ${JSON.stringify(r.series)}, expected ${JSON.stringify(expected.series)}`);
  check(r.markers === expected.markers, `OOM markers: ${r.markers}, expected ${expected.markers}`);
  if (expected.flame) {
    check(r.flameNodes > 0 && drawn.flameFrames > 0, `flame graph nodes: ${r.flameNodes} (DOM ${drawn.flameFrames}), expected some`);
  }
  check(drawn.leaks === expected.leaks, `leak rows: ${drawn.leaks}, expected ${expected.leaks}`);
  check(drawn.ooms === expected.ooms, `OOM diagnoses: ${drawn.ooms}, expected ${expected.ooms}`);
  check(drawn.traps === expected.traps, `traps: ${drawn.traps}, expected ${expected.traps}`);
  check(drawn.health === expected.health, `health lines: ${drawn.health}, expected ${expected.health}`);
  const command = (data.trace && (data.trace.command || data.trace.path)) || 'trace';
  check(drawn.title === 'memtrace: ' + command, `title: ${JSON.stringify(drawn.title)}, expected the trace's command`);
  check(drawn.moment.length === expected.charts && drawn.moment.every(t => t.startsWith('Live by call site at ')),
        `"live by call site" headings: ${JSON.stringify(drawn.moment)}`);

  // Screenshot the page as it opens, then use it: drag-zoom, wheel, click a moment, pan.
  fs.mkdirSync(path.dirname(path.resolve(screenshotPath)), {recursive: true});
  await page.screenshot({path: screenshotPath, fullPage: true});
  if (expected.charts > 0) {
    const over = page.locator('.uplot .u-over').first();
    const box = await over.boundingBox();
    const info = page.locator('.view-info').first();
    const before = await info.textContent();
    await page.mouse.move(box.x + box.width * 0.4, box.y + box.height / 2);
    await page.mouse.down();
    await page.mouse.move(box.x + box.width * 0.6, box.y + box.height / 2, {steps: 5});
    await page.mouse.up();
    await page.mouse.move(box.x + box.width * 0.5, box.y + box.height / 2);
    for (let i = 0; i < 4; i++) await page.mouse.wheel(0, -200);
    await page.mouse.click(box.x + box.width * 0.5, box.y + box.height / 2);
    await page.locator('.toolbar button[title="pan right"]').first().click();
    await page.waitForTimeout(100);
    await page.mouse.move(box.x + box.width * 0.3, box.y + 5);
    const after = await info.textContent();
    check(after !== before, `zooming did not change the chart's window (${before})`);
    const heading = await page.locator('.moment-head h3').first().textContent();
    check(heading.startsWith('Live by call site at '), `after a click: ${heading}`);
    await page.locator('.toolbar button[title="the whole trace"]').first().click();
    // "at the peak": the table's total is the peak allocated, exactly (each device with a peak has the button).
    const withPeak = devicesWithTimeline.filter(d => d.timeline.peaks && d.timeline.peaks.allocated);
    const buttons = page.locator('.moment-head button');
    check(await buttons.count() === withPeak.length, `"at the peak" buttons: ${await buttons.count()}, expected ${withPeak.length}`);
    for (let i = 0; i < withPeak.length && i < await buttons.count(); i++) {
      await buttons.nth(i).click();
      const peakBytes = withPeak[i].timeline.peaks.allocated.bytes;
      const box = buttons.nth(i).locator('xpath=../..');  // the moment's heading and its table
      const head = await box.locator('.moment-head h3').textContent();
      check(head.includes('at the peak allocated, exactly'), `after "at the peak" (device ${withPeak[i].device}): ${head}`);
      const totalTitle = await box.locator('.moment-table tr.total td.num').getAttribute('title', {timeout: 2000}).catch(() => null);
      const total = totalTitle == null ? null : Number(totalTitle.replace(/[^0-9]/g, ''));
      check(total === peakBytes || (peakBytes === 0 && total === null),
            `after "at the peak" (device ${withPeak[i].device}): total allocated ${totalTitle}, the peak is ${peakBytes} B`);
    }
    await page.setViewportSize({width: 1000, height: 800});  // the charts and flame graphs redraw at the new width
    await page.waitForTimeout(400);
    const width = await page.evaluate(() => document.querySelector('.uplot canvas').getBoundingClientRect().width);
    check(width < 1000, `after a resize to 1000 px the chart is ${width} px wide`);
  }
}

// Data of many processes ("kind": "fleet"): check_fleet_report.mjs says what that page must draw.
const fleet = data.kind === 'fleet' ? await import('./check_fleet_report.mjs') : null;

let chromium;
try {
  ({chromium} = await import(pathToFileURL(path.join(repo, 'web/node_modules/playwright-core/index.mjs')).href));
} catch (e) {
  console.error(`check_report: cannot load playwright-core from ${repo}/web/node_modules (run npm ci in web/): ${e.message}`);
  process.exit(1);
}

const browser = await chromium.launch({executablePath: chromiumPath, headless: true,
                                       args: ['--no-sandbox', '--disable-gpu']});
try {
  const page = await browser.newPage({viewport: {width: 1440, height: 900}});
  const fileUrl = pathToFileURL(path.resolve(reportPath)).href;
  page.on('console', msg => { if (msg.type() === 'error') failures.push('console error: ' + msg.text()); });
  page.on('pageerror', err => failures.push('page error: ' + err.message));
  page.on('request', req => {
    const url = req.url();
    if (url !== fileUrl && !url.startsWith('data:')) failures.push('network request: ' + url);
  });

  const t0 = performance.now();
  await page.goto(fileUrl, {waitUntil: 'load', timeout: 60000});
  await page.waitForFunction(() => window.memtraceReport && window.memtraceReport.ready, null, {timeout: 60000});
  const loadMs = Math.round(performance.now() - t0);
  const drawn = await page.evaluate(() => ({
    report: window.memtraceReport,
    canvases: document.querySelectorAll('.uplot canvas').length,
    flameFrames: document.querySelectorAll('.flame g').length,
    leaks: document.querySelectorAll('#leaks tbody tr').length,
    ooms: document.querySelectorAll('#ooms .oom').length,
    traps: document.querySelectorAll('#traps .trap').length,
    health: document.querySelectorAll('#health li').length,
    images: document.querySelectorAll('img').length,
    title: document.title,
    moment: Array.from(document.querySelectorAll('.moment-head h3')).map(h => h.textContent),
  }));
  const r = drawn.report;
  check(drawn.images === 0, `${drawn.images} <img> elements: text from the trace became HTML`);
  if (fleet) await fleet.checkFleetPage(page, data, check, screenshotPath);
  else await checkTracePage(page, drawn);
  if (maxBytes != null) check(sizeBytes <= maxBytes, `report is ${sizeBytes} bytes, more than ${maxBytes}`);
  console.log(`report ${reportPath}: ${sizeBytes} bytes (${(sizeBytes / 1e6).toFixed(2)} MB); ` +
              `load to ready ${loadMs} ms (page: drawn ${r.drawnMs} ms after navigation); ` +
              `charts ${r.charts}, series ${JSON.stringify(r.series)}, OOM markers ${r.markers}, flame nodes ${r.flameNodes}; ` +
              `screenshot ${screenshotPath}`);
} finally {
  await browser.close();
}
if (failures.length) {
  for (const f of failures) console.error('check_report: FAIL: ' + f);
  process.exit(1);
}
