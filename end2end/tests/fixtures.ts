import { execFileSync } from 'node:child_process';
import { test as base, expect } from '@playwright/test';

// Every page must load without a console error or a failed (4xx/5xx) response.
// A test that expects a failed response names its path (or a prefix) in `allowedFailures`.
export const test = base.extend<{ allowedFailures: string[]; problems: string[] }>({
  allowedFailures: [[], { option: true }],
  problems: [
    async ({ page, allowedFailures }, use) => {
      const problems: string[] = [];
      const allowed = (url: string) =>
        url !== '' && allowedFailures.some((path) => new URL(url).pathname.startsWith(path));
      page.on('console', (message) => {
        // Chromium reports every failed load as a console error too.
        const expectedFailure = message.text().startsWith('Failed to load resource') && allowed(message.location().url);
        if (message.type() === 'error' && !expectedFailure) problems.push(`console: ${message.text()}`);
      });
      page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
      page.on('response', (response) => {
        if (response.status() >= 400 && !allowed(response.url())) problems.push(`${response.status()} ${response.url()}`);
      });
      await use(problems);
      expect(problems, 'console errors or failed responses').toEqual([]);
    },
    { auto: true },
  ],
});

export { expect };

// Whether this run's pages run JavaScript (the project's setting; a test's own context may differ).
export function javaScriptOn(): boolean {
  return base.info().project.use.javaScriptEnabled !== false;
}

// Waits until every island of the server-rendered page is live (at once without JavaScript,
// where the page is all there is).
export async function hydrated(page: import('@playwright/test').Page, javaScriptEnabled = javaScriptOn()) {
  if (!javaScriptEnabled) return;
  await expect(page.locator('body')).toHaveAttribute('data-hydrated', 'true');
}

// The z29c binary the server runs (run.sh passes it).
export const bin = process.env.Z29C_BIN ?? '';

// Runs `z29c args…` against the server's private cluster, as run.sh's `user add` does, and
// returns what it printed (stdout, then stderr when it exits non-zero). The deployment lets
// adapters reach loopback only: the demo's destinations are there.
export function z29c(args: string[]): string {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    Z29C_PG_DATA: process.env.Z29C_PG_DATA ?? '',
    Z29C_EGRESS_ALLOW: '127.0.0.0/8,::1',
    RUST_LOG: 'warn',
  };
  delete env.DATABASE_URL;
  try {
    return execFileSync(bin, args, { env }).toString();
  } catch (error) {
    // `adapter verify` exits 1 when a claim is refuted: what it printed is the point.
    const failed = error as { stdout?: Buffer; stderr?: Buffer };
    return `${failed.stdout?.toString() ?? ''}${failed.stderr?.toString() ?? ''}`;
  }
}
