import { test, expect, hydrated } from './fixtures';

const user = process.env.E2E_USER ?? 'e2e-approver';
const password = process.env.E2E_PASSWORD ?? '';

test.describe('the review queue', () => {
  test.use({ allowedFailures: ['/'] });

  test('asks who you are before showing anything', async ({ page }) => {
    const response = await page.goto('/');
    expect(response?.status()).toBe(401);
    await expect(page.getByRole('link', { name: 'Sign in' }).first()).toBeVisible();
    await expect(page.getByRole('table')).toHaveCount(0);
  });
});

test('lists the demo\'s unknown outcomes and its duplicate incident, evidence first', async ({ page }) => {
  await page.goto('/sign-in');
  await hydrated(page);
  await page.getByLabel('Username').fill(user);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await expect(page.getByTestId('signed-in')).toBeVisible();

  const queue = page.getByRole('table', { name: 'Waiting for a person' });
  // The workers drive the demo to its outcomes within seconds; reload until they have.
  await expect(async () => {
    await page.reload();
    await expect(queue.locator('tr', { hasText: 'demo-letter-2' })).toBeVisible({ timeout: 1000 });
    await expect(queue.locator('tr', { hasText: 'demo-letter-3' })).toBeVisible({ timeout: 1000 });
  }).toPass({ timeout: 30_000 });

  const letter = queue.locator('tr', { hasText: 'demo-letter-2' });
  await expect(letter).toContainText('Review required');
  await expect(letter).toContainText('opaque-docs');
  await expect(letter).toContainText('opaque: no key, no lookup');
  await expect(letter).toContainText('/deliver-v2');
  // Recovered automatically: never in the queue.
  await expect(queue.locator('tr', { hasText: 'demo-report-2' })).toHaveCount(0);

  // The engine's alert rules noticed the duplicate effect.
  await expect(async () => {
    await page.reload();
    await expect(page.getByTestId('alerts')).toContainText('duplicate incident', { timeout: 1000 });
  }).toPass({ timeout: 15_000 });

  const incidents = page.getByRole('table', { name: 'Open integrity incidents' });
  await expect(incidents.locator('tr', { hasText: 'demo-invoice-3' })).toContainText('duplicate effect');
  await expect(page.getByTestId('incidents-open')).toContainText(/the \d+ oldest of \d+ open/);
  await page.getByRole('link', { name: 'every open incident' }).click();
  await expect(page.getByRole('heading', { name: 'Open integrity incidents' })).toBeVisible();
  await expect(page.getByTestId('incidents-open')).toHaveText(/^\d+ open\.$/);
  await expect(
    page.getByRole('table', { name: 'Open integrity incidents' }).locator('tr', { hasText: 'demo-invoice-3' }),
  ).toContainText('duplicate effect');
  await page.goBack();

  // The step's evidence, then only what an opaque adapter's contract permits.
  await letter.getByRole('link', { name: 'deliver' }).click();
  await expect(page.getByRole('heading', { name: 'demo-letter-2 · deliver' })).toBeVisible();
  await expect(page.getByTestId('receipt')).toHaveText('none: no receipt proves the effect');
  await expect(page.getByTestId('request-key')).toContainText('/deliver-v2');
  const attempts = page.getByRole('table', { name: 'Attempts (never overwritten)' });
  await expect(attempts.locator('tbody tr')).toHaveCount(1);
  await expect(attempts).toContainText('Outcome unknown');
  await expect(attempts).toContainText('no answer came within the 1000 ms deadline');
  const permitted = page.getByTestId('permitted');
  await expect(permitted).toContainText('Attach evidence');
  await expect(permitted).toContainText('Authorize another attempt');
  await expect(permitted).not.toContainText('Retry with the same key');
  await expect(permitted).not.toContainText('Check destination');
});
