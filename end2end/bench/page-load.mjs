// Cold loads of console pages in headless Chromium, for `z29c bench console`.
//
// Reads one JSON object from standard input:
//   { base, cookie: "name=value", chromium, loads, pages: [{ name, path, signedIn }] }
// and prints one JSON line per load:
//   { name, status, bytes: { html, js, wasm, css, other }, transfer, interactive, domContentLoaded }
// Bytes are each response body as sent (compressed), from the browser's own resource timing;
// `transfer` adds the headers; `interactive` is when the console marked every island of the page
// live (the performance mark `z29c-hydrated`), in milliseconds after navigation start.
// Every load is cold: a new browser context, so nothing is cached.
import { chromium } from 'playwright-core';

const MARK = 'z29c-hydrated';

const input = JSON.parse(await new Promise((resolve) => {
  let text = '';
  process.stdin.on('data', (chunk) => { text += chunk; });
  process.stdin.on('end', () => resolve(text));
}));

const browser = await chromium.launch({
  executablePath: input.chromium,
  args: [
    '--headless',
    '--no-sandbox',
    '--disable-gpu',
    '--disable-quic',
    '--no-first-run',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
  ],
});

try {
  const [cookieName, ...rest] = input.cookie.split('=');
  for (const page of input.pages) {
    for (let load = 0; load < input.loads; load += 1) {
      const context = await browser.newContext();
      if (page.signedIn) {
        await context.addCookies([{ name: cookieName, value: rest.join('='), url: input.base }]);
      }
      const tab = await context.newPage();
      const response = await tab.goto(input.base + page.path, { waitUntil: 'load' });
      await tab.waitForFunction((mark) => performance.getEntriesByName(mark).length > 0, MARK, { timeout: 30_000 });
      const figures = await tab.evaluate((mark) => {
        const kind = (url) => {
          const path = new URL(url).pathname;
          for (const extension of ['wasm', 'js', 'css']) if (path.endsWith(`.${extension}`)) return extension;
          return 'other';
        };
        const navigation = performance.getEntriesByType('navigation')[0];
        const bytes = { html: navigation.encodedBodySize, js: 0, wasm: 0, css: 0, other: 0 };
        let transfer = navigation.transferSize;
        // A preloaded file fetched again is one download: count each address once.
        const seen = new Map();
        for (const r of performance.getEntriesByType('resource')) {
          seen.set(r.name, Math.max(seen.get(r.name) ?? 0, r.encodedBodySize));
          transfer += r.transferSize;
        }
        for (const [url, size] of seen) bytes[kind(url)] += size;
        return {
          bytes,
          transfer,
          interactive: performance.getEntriesByName(mark)[0].startTime,
          domContentLoaded: navigation.domContentLoadedEventEnd,
        };
      }, MARK);
      console.log(JSON.stringify({ name: page.name, status: response?.status() ?? 0, ...figures }));
      await context.close();
    }
  }
} finally {
  await browser.close();
}
