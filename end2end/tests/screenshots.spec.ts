import { test, expect, hydrated, javaScriptOn } from './fixtures';
import type { Page } from '@playwright/test';
import * as fs from 'node:fs';
import * as path from 'node:path';

// The console's pictures in README.md and the book, taken from the demo: the review queue, the
// step page of a step in review, the adapters page. `make screenshots` writes them to
// docs/images/; any other run writes them to $Z29C_SCREENSHOTS (target/screenshots by default),
// so the browser tests prove the pages they show still draw. It only looks: no action, so it may
// run at any point of the console project.
const user = process.env.E2E_USER ?? 'e2e-approver';
const password = process.env.E2E_PASSWORD ?? '';
const folder = process.env.Z29C_SCREENSHOTS ?? path.resolve(__dirname, '..', '..', 'target', 'screenshots');

test.use({ viewport: { width: 1280, height: 800 } });

async function signIn(page: Page) {
  await page.goto('/sign-in');
  await hydrated(page);
  await page.getByLabel('Username').fill(user);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await expect(page.getByTestId('signed-in')).toBeVisible();
}

// The pictures are taken once a run: in the pass with JavaScript (the console as people see it);
// the pass without it still checks every page draws.
async function shoot(page: Page, name: string) {
  if (!javaScriptOn()) return;
  await hydrated(page);
  fs.mkdirSync(folder, { recursive: true });
  await page.screenshot({ path: path.join(folder, name), fullPage: false });
}

test('the review queue, a step in review and the adapters page, as the docs show them', async ({ page }) => {
  await signIn(page);

  const queue = page.getByRole('table', { name: 'Waiting for a person' });
  // The workers drive the demo to its outcomes within seconds; reload until they have.
  await expect(async () => {
    await page.goto('/');
    await expect(queue.locator('tr', { hasText: 'demo-letter-2' })).toBeVisible({ timeout: 1000 });
    await expect(queue.locator('tr', { hasText: 'demo-letter-3' })).toBeVisible({ timeout: 1000 });
  }).toPass({ timeout: 30_000 });
  await expect(page.getByRole('heading', { name: 'Review queue' })).toBeVisible();
  await expect(queue.locator('tr', { hasText: 'demo-letter-2' })).toContainText('Review required');
  await shoot(page, 'queue.png');

  await queue.locator('tr', { hasText: 'demo-letter-2' }).getByRole('link', { name: 'deliver' }).click();
  await expect(page.getByRole('heading', { name: 'demo-letter-2 · deliver' })).toBeVisible();
  await expect(page.getByRole('heading', { name: 'Evidence', exact: true })).toBeVisible();
  await expect(page.getByTestId('state')).toHaveText('Review required');
  await expect(page.getByRole('table', { name: 'Attempts (never overwritten)' })).toContainText('Outcome unknown');
  await expect(page.getByTestId('permitted')).toContainText('Authorize another attempt');
  await shoot(page, 'step.png');

  await page.goto('/adapters');
  await expect(page.getByRole('heading', { name: 'Adapters' })).toBeVisible();
  await expect(page.locator('[data-adapter="opaque-docs"]').getByTestId('sending')).toHaveText(/^sends/);
  await expect(page.getByTestId('adapter').first()).toBeVisible();
  await shoot(page, 'adapters.png');
});
