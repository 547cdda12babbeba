import { test, expect, hydrated, javaScriptOn } from './fixtures';

const user = process.env.E2E_USER ?? 'e2e-approver';
const password = process.env.E2E_PASSWORD ?? '';

test('bulk recovery shows the exact rows, skips what the contract refuses, and acts on the rest', async ({ page }) => {
  await page.goto('/sign-in');
  await page.getByLabel('Username').fill(user);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await expect(page.getByTestId('signed-in')).toBeVisible();

  // The demo's two remaining idempotent document steps under review (statements 3 and 4) can
  // be retried with their keys; the opaque letters under review cannot, and are listed as
  // refused. (The payments are another definition: payments.spec.ts acts on them.)
  await expect(async () => {
    await page.goto('/bulk?action=retry_same_key&definition=document_delivery');
    await expect(page.getByTestId('bulk-count')).toContainText('2 permitted for Retry with the same key', { timeout: 1000 });
  }).toPass({ timeout: 30_000 });
  const rows = page.getByTestId('bulk-rows');
  await expect(rows.locator('tr', { hasText: 'demo-statement-3' })).toContainText('permitted');
  await expect(rows.locator('tr', { hasText: 'demo-letter-2' })).toContainText('is not permitted');
  await hydrated(page);
  await page.getByLabel('Rate (steps per second)').fill('10');
  await page.getByLabel('Reason (recorded in the audit log for every row)').fill('the destination was down this morning');
  await page.getByRole('button', { name: 'Retry with the same key on these 2 row(s)' }).click();
  const finished = '2 of 2 done, 0 refused, 0 failed, 0 pending — finished';
  if (javaScriptOn()) {
    // The progress follows itself (an island).
    await expect(page.getByTestId('bulk-progress')).toHaveText(finished, { timeout: 15_000 });
  } else {
    // Without JavaScript the run's page is drawn as it stood: loading it again shows more.
    await expect(async () => {
      await page.reload();
      await expect(page.getByTestId('bulk-progress')).toHaveText(finished, { timeout: 1000 });
    }).toPass({ timeout: 15_000 });
  }

  // What the run did is on each step: a receipt by idempotent replay.
  await page.getByRole('link', { name: 'demo-statement-3' }).click();
  await expect(async () => {
    await page.reload();
    await expect(page.getByTestId('receipt')).toContainText('by idempotent replay', { timeout: 1000 });
  }).toPass({ timeout: 20_000 });
  // The opaque letters were not touched.
  await page.goto('/?adapter=opaque-docs');
  await expect(page.getByRole('table', { name: 'Waiting for a person' }).locator('tr', { hasText: 'demo-letter-2' })).toContainText('Review required');
});
