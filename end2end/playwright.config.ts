import { defineConfig } from '@playwright/test';

// The server is started by run.sh (the real `z29c serve` on its own private cluster);
// global-setup waits until it is ready. Chromium is Debian's: Playwright downloads nothing.
const baseURL = process.env.Z29C_BASE_URL ?? 'http://127.0.0.1:3100';
// `make e2e` runs the suite twice, on two fresh servers: as is, then with E2E_JAVASCRIPT=off,
// where every page and form must work as plain HTML.
const javaScriptEnabled = process.env.E2E_JAVASCRIPT !== 'off';

export default defineConfig({
  testDir: './tests',
  globalSetup: './global-setup.ts',
  workers: 1,
  retries: 0,
  timeout: 30_000,
  reporter: [['list']],
  // The refusal tests and the step buttons' test change nothing, but need steps in the states
  // the demo leaves them in, before the other tests act on them: they run first.
  // The trust test refutes an adapter's key claim, which changes what every later step of it
  // may do: it runs last, after everything else (and checks both with and without JavaScript
  // itself). The archive test moves every settled workflow out of the hot tables: after all.
  projects: [
    { name: 'refusals', testMatch: /(refusals|step-buttons)\.spec\.ts/ },
    { name: 'console', testIgnore: /(refusals|step-buttons|trust|archive)\.spec\.ts/, dependencies: ['refusals'] },
    { name: 'trust', testMatch: /trust\.spec\.ts/, dependencies: ['console'] },
    { name: 'archive', testMatch: /archive\.spec\.ts/, dependencies: ['trust'] },
  ],
  use: {
    baseURL,
    javaScriptEnabled,
    browserName: 'chromium',
    launchOptions: {
      executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
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
    },
  },
});
