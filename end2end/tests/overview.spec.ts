import { test, expect, hydrated, javaScriptOn, z29c } from './fixtures';
import type { Page } from '@playwright/test';

// The overview needs a signed-in viewer (its counts are no one else's business).
const viewer = process.env.E2E_VIEWER ?? 'e2e-viewer';
const viewerPassword = process.env.E2E_VIEWER_PASSWORD ?? '';

async function signInAsViewer(page: Page) {
  await page.goto('/sign-in');
  await page.getByLabel('Username').fill(viewer);
  await page.getByLabel('Password').fill(viewerPassword);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await expect(page.getByTestId('signed-in')).toBeVisible();
}

test('the overview asks a visitor who has not signed in to sign in', async ({ browser }) => {
  const context = await browser.newContext({ javaScriptEnabled: false });
  const page = await context.newPage();
  await page.goto('/overview');
  await expect(page.getByText('Sign in to see the overview')).toBeVisible();
  await expect(page.getByRole('table', { name: 'Workflows by state' })).toHaveCount(0);
  await context.close();
});

test('the overview is rendered by the server before any script runs', async ({ browser }) => {
  const context = await browser.newContext({ javaScriptEnabled: false });
  const page = await context.newPage();
  await signInAsViewer(page);
  await page.goto('/overview');
  await expect(page.getByRole('heading', { name: 'Overview' })).toBeVisible();
  await expect(page.getByRole('table', { name: 'Workflows by state' })).toBeVisible();
  await expect(page.getByTestId('total')).toHaveText(/^\d+$/);
  // The charts are SVG drawn on the server: no script needed to read them.
  const outcomes = page.getByRole('img', { name: 'Step outcomes per logical step' });
  await expect(outcomes.locator('text', { hasText: /^deliver \(\d+\)$/ })).toBeVisible();
  await expect(page.getByTestId('duplicates')).toContainText(/Duplicate effects detected: [1-9]\d* \(/);
  await expect(page.getByRole('img', { name: 'Unknown outcomes by age' })).toBeVisible();
  await context.close();
});

test('the overview hydrates and refreshes its counts in the browser', async ({ page }) => {
  test.skip(!javaScriptOn(), 'the refresh in place is an island; without JavaScript, loading the page again is the refresh');
  await signInAsViewer(page);
  await page.goto('/overview');
  await hydrated(page);
  await expect(page.getByTestId('refreshes')).toHaveText('Counts as rendered by the server.');
  await page.getByRole('button', { name: 'Refresh counts' }).click();
  await expect(page.getByTestId('refreshes')).toHaveText('Refreshed once in this page.');
  // The table re-rendered from the server function's answer to this refresh.
  await expect(page.locator('table.counts[data-generation="1"]')).toBeVisible();
  await expect(page.locator('.error')).toHaveCount(0);
});

test('the overview fetches its own island\'s wasm, announced in its head, and no other island\'s', async ({ page }) => {
  test.skip(!javaScriptOn(), 'without JavaScript no wasm is fetched');
  const wasm: string[] = [];
  page.on('request', (request) => {
    if (request.url().endsWith('.wasm')) wasm.push(new URL(request.url()).pathname);
  });
  await signInAsViewer(page);
  await page.goto('/overview');
  await hydrated(page);
  // The head preloads the chunks this page's island needs, so they arrive beside the main module.
  await expect(page.locator('head link[rel="preload"][href*="/split_live_overview_loader_"]')).toHaveCount(1);
  expect(wasm.some((path) => path.includes('/split_live_overview_loader_'))).toBe(true);
  expect(wasm.filter((path) => /split_(step_action_form|live_progress)_loader_/.test(path))).toEqual([]);
});

test.describe('an unknown address', () => {
  test.use({ allowedFailures: ['/no/such/page'] });

  test('shows the not-found page with status 404', async ({ page }) => {
    const response = await page.goto('/no/such/page');
    expect(response?.status()).toBe(404);
    await expect(page.getByRole('heading', { name: 'Page not found' })).toBeVisible();
  });
});

test('/metrics shows the demo run in semantic figures to a token, and nothing without one', async ({ request }) => {
  const anonymous = await request.get('/metrics');
  expect(anonymous.status()).toBe(401);
  const token = z29c(['token', 'create', 'e2e-prometheus', '--role', 'viewer']).trim();
  expect(token, 'z29c token create printed the token alone').not.toContain(' ');
  const authorization = `Bearer ${token}`;
  await expect(async () => {
    const text = await (await request.get('/metrics', { headers: { authorization } })).text();
    // Unknown outcomes under the opaque adapter, recovered ones by replay and by lookup, and the
    // demo's duplicate deliveries.
    expect(text).toMatch(/z29c_attempts_total\{adapter="opaque-docs",logical="deliver",outcome="outcome_unknown"\} [1-9]/);
    expect(text).toMatch(/z29c_recovery_path_total\{path="replay"\} [1-9]/);
    expect(text).toMatch(/z29c_recovery_path_total\{path="query"\} [1-9]/);
    expect(text).toMatch(/z29c_duplicates_detected_total\{adapter="queryable-docs",logical="deliver"\} 2/);
    expect(text).toMatch(/z29c_steps_waiting\{state="review_required"\} \d+/);
  }).toPass({ timeout: 15_000 });
});
