import { test, expect, hydrated } from './fixtures';
import type { Page } from '@playwright/test';

// The demo's payments (`payment_receipt`): a card charge through the Stripe-style payments
// API, then a receipt e-mail. Each test acts on its own demo workflow.
const user = process.env.E2E_USER ?? 'e2e-approver';
const password = process.env.E2E_PASSWORD ?? '';

async function signIn(page: Page) {
  await page.goto('/sign-in');
  await page.getByLabel('Username').fill(user);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await expect(page.getByTestId('signed-in')).toBeVisible();
}

function queue(page: Page) {
  return page.getByRole('table', { name: 'Waiting for a person' });
}

// Waits until the demo put `workflow`'s step `logical` in the queue, then opens it.
async function openFromQueue(page: Page, workflow: string, logical: string) {
  const row = queue(page).locator('tr', { hasText: workflow });
  await expect(async () => {
    await page.goto('/');
    await expect(row).toBeVisible({ timeout: 1000 });
  }).toPass({ timeout: 30_000 });
  await row.getByRole('link', { name: logical }).click();
  await expect(page.getByRole('heading', { name: `${workflow} · ${logical}` })).toBeVisible();
}

// The actions offered on the step page, in order, by their names.
async function permitted(page: Page) {
  return page.getByTestId('permitted').locator('[data-action]').evaluateAll((cards) => cards.map((c) => c.getAttribute('data-action')));
}

test('the queue shows payment and receipt steps next to the documents', async ({ page }) => {
  await signIn(page);
  // The workers drive the demo to its outcomes within seconds; reload until they have. The
  // charge whose answer was lost is recovered by same-key replay, the receipt whose answer was
  // lost by asking the mail service: neither stays in the queue.
  await expect(async () => {
    await page.goto('/');
    await expect(queue(page).locator('tr', { hasText: 'demo-payment-3' })).toBeVisible({ timeout: 1000 });
    await expect(queue(page).locator('tr', { hasText: 'demo-payment-5' })).toBeVisible({ timeout: 1000 });
    await expect(queue(page).locator('tr', { hasText: 'demo-payment-1' })).toHaveCount(0, { timeout: 1000 });
    await expect(queue(page).locator('tr', { hasText: 'demo-payment-4' })).toHaveCount(0, { timeout: 1000 });
  }).toPass({ timeout: 30_000 });
  const reviewed = queue(page).locator('tr', { hasText: 'demo-payment-3' });
  await expect(reviewed).toContainText('Review required');
  await expect(reviewed).toContainText('payments-reviewed');
  await expect(reviewed.getByRole('link', { name: 'charge' })).toBeVisible();
  const declined = queue(page).locator('tr', { hasText: 'demo-payment-2' });
  await expect(declined).toContainText('Rejected');
  const receipt = queue(page).locator('tr', { hasText: 'demo-payment-5' });
  await expect(receipt).toContainText('mailer');
  await expect(receipt.getByRole('link', { name: 'receipt' })).toBeVisible();
  // The documents are there too.
  await expect(queue(page).locator('tr', { hasText: 'demo-letter-2' })).toBeVisible();
});

test('a charge left for review shows its form-encoded request, its verified contract and exactly what it permits', async ({ page }) => {
  await signIn(page);
  await openFromQueue(page, 'demo-payment-3', 'charge');
  await hydrated(page);
  await expect(page.getByTestId('state')).toHaveText('Review required');
  await expect(page.getByTestId('trust')).toContainText(/^Verified: version \d+ passed verification against http:\/\/127\.0\.0\.1:\d+/);
  // Each claim with its trust: what was proven on its failure path, and what was never provoked.
  const claims = page.getByTestId('claims');
  await expect(claims.locator('[data-trust=verified]', { hasText: 'idempotency key' })).toBeVisible();
  await expect(claims.locator('[data-trust=verified]', { hasText: 'status lookup' })).toBeVisible();
  await expect(claims.locator('[data-trust=unverified]').first()).toContainText('never provoked');
  await expect(page.getByTestId('receipt')).toHaveText('none: no receipt proves the effect');
  // The canonical request: a form body, as the payments API takes it; the API key is not in it.
  await page.getByText('Canonical request (redacted)').click();
  const request = page.locator('details pre');
  await expect(request).toContainText('"/v1/charges"');
  await expect(request).toContainText('"form"');
  await expect(request).toContainText('"amount": "2500"');
  await expect(request).toContainText('"customer": "cus_grace"');
  await expect(request).toContainText('"metadata[z29c_key]"');
  await expect(request).not.toContainText('sk_test_');
  const attempts = page.getByRole('table', { name: 'Attempts (never overwritten)' });
  await expect(attempts).toContainText('Outcome unknown');
  // Idempotent and queryable, inside the key's retention: ask, replay, evidence, then the
  // approver's decisions. Never another attempt under a new key.
  expect(await permitted(page)).toEqual(['check_destination', 'retry_same_key', 'attach_evidence', 'waive', 'cancel']);

  // Asking the payments API (its search by metadata) finds the charge.
  const check = page.locator('[data-action=check_destination]');
  await check.getByLabel('Reason (recorded in the audit log)').fill('did the card get charged?');
  await check.getByRole('button', { name: 'Check destination' }).click();
  await expect(page.getByTestId('notice')).toContainText(/Verified from external reference ch_\w+: the step succeeded with a status-query receipt/);
  await expect(page.getByTestId('receipt')).toContainText(/^ch_\w+, by status query/);
  await expect(page.getByTestId('state')).toHaveText('Succeeded');
  // Settled: only a refund (Cancel) remains.
  expect(await permitted(page)).toEqual(['cancel']);
  await expect(page.locator('[data-action=cancel]')).toContainText('requests its withdrawal');
  await expect(page.getByTestId('timeline')).toContainText(`check_destination by ${user}`);
});

test('a declined card is rejected with its code and can only be replaced', async ({ page }) => {
  await signIn(page);
  await openFromQueue(page, 'demo-payment-2', 'charge');
  await expect(page.getByTestId('state')).toHaveText('Rejected by the destination');
  const attempts = page.getByRole('table', { name: 'Attempts (never overwritten)' });
  await expect(attempts.locator('tbody tr')).toHaveCount(1);
  await expect(attempts).toContainText('card_declined');
  expect(await permitted(page)).toEqual(['replace']);
});
