import { test, expect, hydrated } from './fixtures';
import type { Page } from '@playwright/test';

// Each test acts on its own demo workflow (the review-queue spec relies on demo-letter-2,
// demo-letter-3 and demo-invoice-3 staying as the demo left them).
const user = process.env.E2E_USER ?? 'e2e-approver';
const password = process.env.E2E_PASSWORD ?? '';
const viewer = process.env.E2E_VIEWER ?? 'e2e-viewer';
const viewerPassword = process.env.E2E_VIEWER_PASSWORD ?? '';

async function signIn(page: Page, name = user, secret = password) {
  await page.goto('/sign-in');
  await page.getByLabel('Username').fill(name);
  await page.getByLabel('Password').fill(secret);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await expect(page.getByTestId('signed-in')).toBeVisible();
}

// Opens the `deliver` step of `workflow` from the review queue, once the demo put it there.
async function openFromQueue(page: Page, workflow: string) {
  const row = page.getByRole('table', { name: 'Waiting for a person' }).locator('tr', { hasText: workflow });
  await expect(async () => {
    await page.goto('/');
    await expect(row).toBeVisible({ timeout: 1000 });
  }).toPass({ timeout: 30_000 });
  await row.getByRole('link', { name: 'deliver' }).click();
  await expect(page.getByRole('heading', { name: `${workflow} · deliver` })).toBeVisible();
}

function card(page: Page, action: string) {
  return page.locator(`[data-action=${action}]`);
}

test('retrying with the same key in the live page ends in an idempotent-replay receipt', async ({ page }) => {
  await signIn(page);
  await openFromQueue(page, 'demo-statement-1');
  await hydrated(page);
  const retry = card(page, 'retry_same_key');
  await expect(retry).toContainText('same request key');
  await retry.getByLabel('Reason (recorded in the audit log)').fill('the customer has not received it');
  await retry.getByRole('button', { name: 'Retry with the same key' }).click();
  await expect(page.getByTestId('notice')).toContainText('A new attempt will be sent under the same request key');
  await expect(async () => {
    await page.reload();
    await expect(page.getByTestId('receipt')).toContainText('by idempotent replay', { timeout: 1000 });
  }).toPass({ timeout: 20_000 });
  await expect(page.getByTestId('state')).toHaveText('Succeeded');
  await expect(page.getByTestId('timeline')).toContainText(`retry_same_key by ${user}`);
});

test('checking the destination works without JavaScript and verifies the delivery', async ({ browser }) => {
  const context = await browser.newContext({ javaScriptEnabled: false });
  const page = await context.newPage();
  await signIn(page);
  await openFromQueue(page, 'demo-statement-2');
  const check = card(page, 'check_destination');
  await check.getByLabel('Reason (recorded in the audit log)').fill('look before sending again');
  await check.getByRole('button', { name: 'Check destination' }).click();
  await expect(page.getByTestId('notice')).toContainText('Verified from external reference');
  await expect(page.getByTestId('receipt')).toContainText('by status query');
  // Settled: no more checks or retries; only a withdrawal (Cancel) remains.
  await expect(card(page, 'check_destination')).toHaveCount(0);
  await expect(card(page, 'cancel')).toContainText('requests its withdrawal');
  await context.close();
});

test('manual evidence becomes the receipt', async ({ page }) => {
  await signIn(page);
  await openFromQueue(page, 'demo-letter-5');
  await hydrated(page);
  const attach = card(page, 'attach_evidence');
  await attach.getByLabel('External reference at the destination').fill('x-phone-77');
  await attach.getByLabel('Evidence (what you saw, and where)').fill('the opaque destination\'s support desk read it out');
  await attach.getByLabel('Reason (recorded in the audit log)').fill('confirmed by phone');
  await attach.getByRole('button', { name: 'Attach evidence' }).click();
  await expect(page.getByTestId('notice')).toContainText('Receipt recorded from manual evidence: external reference x-phone-77');
  await expect(page.getByTestId('receipt')).toContainText('x-phone-77, by manual evidence');
});

test('a waiver names the residual uncertainty', async ({ page }) => {
  await signIn(page);
  await openFromQueue(page, 'demo-letter-6');
  await hydrated(page);
  const waive = card(page, 'waive');
  await expect(waive.getByLabel('Residual uncertainty (what remains unknown)')).toHaveValue(/customer-42/);
  await waive.getByLabel('Reason (recorded in the audit log)').fill('the letter is not needed any more');
  await waive.getByRole('button', { name: 'Waive' }).click();
  await expect(page.getByTestId('notice')).toContainText('Step waived. Residual uncertainty recorded');
  await expect(page.getByTestId('state')).toHaveText('Waived');
});

test('another attempt under an opaque adapter shows the duplicate risk and needs it acknowledged', async ({ page }) => {
  await signIn(page);
  await openFromQueue(page, 'demo-letter-4');
  await hydrated(page);
  const authorize = card(page, 'authorize_another_attempt');
  await expect(authorize).toContainText('Duplicate risk');
  await expect(authorize).toContainText('may make the effect a second time for customer-42');
  await authorize.getByLabel('Reason (recorded in the audit log)').fill('the customer asked for it again');
  await authorize.getByRole('button', { name: 'Authorize another attempt' }).click();
  // The browser will not submit without the acknowledgement.
  await expect(page.getByTestId('notice')).toHaveCount(0);
  await authorize.getByLabel('I understand that the delivery for customer-42 may happen twice.').check();
  await authorize.getByRole('button', { name: 'Authorize another attempt' }).click();
  await expect(page.getByTestId('notice')).toContainText('a second effect is possible');
  await expect(async () => {
    await page.reload();
    await expect(page.getByTestId('state')).toHaveText('Succeeded', { timeout: 1000 });
  }).toPass({ timeout: 20_000 });
});

test('a rejected request is replaced with corrected input under a new key, lineage on both steps', async ({ page }) => {
  await signIn(page);
  await openFromQueue(page, 'demo-notice-1');
  await hydrated(page);
  await expect(page.getByTestId('state')).toHaveText('Rejected by the destination');
  const oldKey = await page.getByTestId('request-key').textContent();
  const oldDigest = await page.getByTestId('input-digest').textContent();
  const replace = card(page, 'replace');
  const input = replace.getByLabel('Corrected input (JSON; the new digest shows on both steps)');
  const corrected = JSON.parse(await input.inputValue());
  corrected.recipient = 'customer-43';
  await input.fill(JSON.stringify(corrected));
  await replace.getByLabel('Reason (recorded in the audit log)').fill('the recipient id was wrong');
  await replace.getByRole('button', { name: 'Replace with corrected input' }).click();
  await expect(page.getByTestId('notice')).toContainText('Replacement step created under the new request key');
  await expect(page.getByTestId('replaces')).toBeVisible();
  await expect(page.getByTestId('input-digest')).not.toHaveText(oldDigest!);
  await expect(page.getByTestId('request-key')).toHaveText(`${oldKey}/r1`);
  await page.getByTestId('replaces').getByRole('link').click();
  await expect(page.getByTestId('replaced-by')).toBeVisible();
  await expect(page.getByTestId('input-digest')).toHaveText(oldDigest!);
});

test('cancelling a delivered document requests its withdrawal as a step of its own', async ({ page }) => {
  await signIn(page);
  // demo-letter-1 succeeded, so it is in no queue: search finds it by its creation key.
  await page.goto('/');
  await page.getByLabel('Search').fill('demo-letter-1');
  await page.getByRole('button', { name: 'Apply' }).click();
  const found = page.getByTestId('found');
  await expect(found.locator('tr', { hasText: 'deliver' })).toContainText('Succeeded');
  await found.getByRole('link', { name: 'deliver' }).click();
  await hydrated(page);
  const cancel = card(page, 'cancel');
  await expect(cancel).toContainText('requests its withdrawal');
  await cancel.getByLabel('Reason (recorded in the audit log)').fill('sent to the wrong customer');
  await cancel.getByRole('button', { name: 'Cancel' }).click();
  await expect(page.getByTestId('notice')).toContainText('Withdrawal of');
  await expect(page.getByRole('heading', { name: 'demo-letter-1 · deliver.withdrawal' })).toBeVisible();
  await expect(async () => {
    await page.reload();
    await expect(page.getByTestId('receipt')).toContainText('by direct response', { timeout: 1000 });
  }).toPass({ timeout: 20_000 });
});

test('a step with an open incident links to the incident instead of offering a form that cannot work', async ({ page }) => {
  await signIn(page);
  const incidents = page.getByRole('table', { name: 'Open integrity incidents' });
  await expect(async () => {
    await page.goto('/');
    await expect(incidents.locator('tr', { hasText: 'demo-invoice-4' })).toBeVisible({ timeout: 1000 });
  }).toPass({ timeout: 30_000 });
  await incidents.locator('tr', { hasText: 'demo-invoice-4' }).getByRole('link').click();
  const incident = page.url();
  await page.getByRole('link', { name: 'The step\'s evidence' }).click();
  await hydrated(page);
  const resolve = page.locator('[data-action="resolve_incident"]');
  await expect(resolve).toBeVisible();
  await expect(resolve.locator('form, button')).toHaveCount(0);
  await resolve.getByRole('link', { name: 'Open the incident to resolve it' }).click();
  await expect(page).toHaveURL(incident);
});

test('a duplicate incident is resolved by naming the canonical result and withdrawing the other', async ({ page }) => {
  await signIn(page);
  const incidents = page.getByRole('table', { name: 'Open integrity incidents' });
  await expect(async () => {
    await page.goto('/');
    await expect(incidents.locator('tr', { hasText: 'demo-invoice-4' })).toBeVisible({ timeout: 1000 });
  }).toPass({ timeout: 30_000 });
  await incidents.locator('tr', { hasText: 'demo-invoice-4' }).getByRole('link').click();
  await hydrated(page);
  const references = page.getByTestId('references');
  await expect(references.locator('tbody tr')).toHaveCount(2);
  const canonical = (await references.locator('tbody tr').first().locator('code').first().textContent())!;
  await page.getByLabel(canonical).check();
  await page.getByLabel(/Request withdrawal/).check();
  await page.getByLabel('Reason (recorded in the audit log)').fill('the first delivery is the one the customer acknowledged');
  await page.getByRole('button', { name: 'Resolve incident' }).click();
  await expect(page.getByTestId('notice')).toContainText(`Resolved: ${canonical} stands; withdrawal of 1 duplicate(s) requested.`);
  await expect(page.getByTestId('resolution')).toContainText(`by ${user}`);
  await expect(async () => {
    await page.reload();
    await expect(page.getByTestId('withdrawals')).toContainText('Succeeded', { timeout: 1000 });
  }).toPass({ timeout: 20_000 });
  await page.getByRole('link', { name: 'The step\'s evidence' }).click();
  await page.getByRole('link', { name: 'What the customer sees' }).click();
  await expect(page.getByTestId('customer-status')).toHaveText('Completed with duplicate effect; duplicate withdrawn');
});

test.describe('refusals', () => {
  test.use({ allowedFailures: ['/fn/'] });

  test('a forged post of an action the contract forbids is refused and changes nothing', async ({ page }) => {
    await signIn(page);
    await openFromQueue(page, 'demo-letter-2');
    const form = card(page, 'attach_evidence').locator('form');
    const action = (await form.getAttribute('action'))!;
    const field = async (name: string) => (await form.locator(`input[name=${name}]`).getAttribute('value'))!;
    const response = await page.request.post(action, {
      form: {
        step: await field('step'),
        version: await field('version'),
        csrf: await field('csrf'),
        action: 'retry_same_key',
        reason: 'forged',
      },
      headers: { Accept: 'application/json' },
    });
    expect(response.status()).toBe(403);
    expect(await response.text()).toContain('is not permitted for a step that is review required');
    await page.reload();
    await expect(page.getByTestId('state')).toHaveText('Review required');
    await expect(page.getByTestId('timeline')).not.toContainText('forged');
  });

  test('a stale page is refused with the step\'s new state', async ({ browser }) => {
    const first = await browser.newContext();
    const a = await first.newPage();
    await signIn(a);
    await openFromQueue(a, 'demo-letter-3');
    await hydrated(a);
    // The page this form came from is one version behind the step: as if another operator
    // had acted after it was drawn.
    const form = card(a, 'waive').locator('form');
    const fields = Object.fromEntries(
      await Promise.all(['step', 'version', 'csrf'].map(async (n) => [n, (await form.locator(`input[name=${n}]`).getAttribute('value'))!])),
    );
    const stale = { ...fields, version: String(Number(fields.version) - 1), action: 'waive', reason: 'old tab', residual_uncertainty: 'unknown' };
    const response = await a.request.post((await form.getAttribute('action'))!, { form: stale, headers: { Accept: 'application/json' } });
    expect(response.status()).toBe(409);
    expect(await response.text()).toContain('changed since your page was drawn');
    await a.reload();
    await expect(a.getByTestId('state')).toHaveText('Review required');
    await first.close();
  });

  test('a viewer sees the evidence and no action forms', async ({ page }) => {
    await signIn(page, viewer, viewerPassword);
    await openFromQueue(page, 'demo-letter-2');
    await expect(page.getByTestId('permitted')).toHaveCount(0);
    await expect(page.getByTestId('beyond-role')).toContainText('Attach evidence (operator)');
  });
});

test('the audit log lists the actions with who and why, filterable by action', async ({ page }) => {
  await signIn(page);
  await page.goto('/audit?action=waive');
  const audit = page.getByTestId('audit');
  await expect(audit.locator('tbody tr').first()).toContainText(user);
  await expect(audit).toContainText('the letter is not needed any more');
  await expect(audit).not.toContainText('confirmed by phone');
  await page.goto('/audit');
  await expect(page.getByTestId('audit')).toContainText('confirmed by phone');
});
