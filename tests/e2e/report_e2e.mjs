// Opens report pages (gpuscope report / compare --html) in Debian's chromium, driven by
// playwright-core, offline: every request other than the page itself is refused and counted.
// For each page prints one JSON line on stdout that the calling test checks:
//   {"file", "errors": [console errors and warnings, page errors, CSP violations],
//    "requests": [URLs other than the page], "state": window.gsReport,
//    "charts": [{id, points: x values drawn by uPlot, series, canvas: a drawn canvas}],
//    "text": the page's text, "findings": [ids], "screenshot"}
//
//   node report_e2e.mjs ARTIFACTS_DIR FILE.html [FILE.html ...]   (GS_CHROMIUM, GS_WEB_DIR)
// A URL (http://...) instead of a file is loaded as is (gpuscope report --serve).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {createRequire} from 'node:module';
import {fileURLToPath, pathToFileURL} from 'node:url';

const WEB = process.env.GS_WEB_DIR ??
  path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'web');
const {chromium} = createRequire(path.join(WEB, 'package.json'))('playwright-core');
const CHROMIUM = process.env.GS_CHROMIUM ?? '/usr/bin/chromium';
const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];

const [artifacts, ...files] = process.argv.slice(2);
fs.mkdirSync(artifacts, {recursive: true});
const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'gs-report-chromium.'));
const ctx = await chromium.launchPersistentContext(profile, {
  executablePath: CHROMIUM, headless: true, args: ARGS,
  viewport: {width: 1280, height: 900}, colorScheme: 'light',
});
try {
  for (const f of files) {
    const url = /^https?:/.test(f) ? f : pathToFileURL(path.resolve(f)).href;
    const page = await ctx.newPage();
    const errors = [];
    const requests = [];
    page.on('console', (m) => {
      if (m.type() === 'error' || m.type() === 'warning') errors.push(`${m.type()}: ${m.text()}`);
    });
    page.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
    await page.route('**/*', (route) => {
      const u = route.request().url();
      if (u === url || u.startsWith('data:')) return route.continue();
      requests.push(u);
      return route.abort();
    });
    await page.goto(url, {waitUntil: 'load'});
    await page.waitForFunction(() => window.gsReport && (window.gsReport.ready ||
      window.gsReport.errors.length), null, {timeout: 15000}).catch(() => {});
    await page.waitForTimeout(300);
    const res = await page.evaluate(() => {
      const charts = [...document.querySelectorAll('.chart')].map((c) => {
        const cv = c.querySelector('canvas');
        let drawn = false;
        if (cv && cv.width && cv.height) {
          const d = cv.getContext('2d').getImageData(0, 0, cv.width, cv.height).data;
          for (let i = 3; i < d.length; i += 4 * 7) if (d[i]) { drawn = true; break; }
        }
        return {id: c.id, points: Number(c.dataset.points), series: Number(c.dataset.series),
          uplot: !!c.querySelector('.uplot'), canvas: drawn};
      });
      return {state: window.gsReport ? {ready: window.gsReport.ready, kind: window.gsReport.kind,
        charts: window.gsReport.charts, errors: window.gsReport.errors} : null,
        charts, text: document.body.innerText,
        findings: [...document.querySelectorAll('.finding')].map((x) => x.dataset.id),
        sections: [...document.querySelectorAll('section')].map((x) => x.id)};
    });
    const shot = path.join(artifacts, 'report-' + (/^https?:/.test(f) ? 'served' :
      path.basename(path.dirname(path.resolve(f))) + '-' + path.basename(f, '.html'))
      .replace(/[^A-Za-z0-9._-]/g, '_') + '.png');
    await page.screenshot({path: shot, fullPage: true});
    console.log(JSON.stringify({file: f, errors, requests, screenshot: shot, ...res}));
    await page.close();
  }
} finally {
  await ctx.close();
  fs.rmSync(profile, {recursive: true, force: true});
}
