import { execFileSync } from 'node:child_process';
import { test, expect } from './fixtures';
import type { Page } from '@playwright/test';

// The controls over more than one step (docs/DESIGN.md §20), in the browser: an approver holds
// and resumes an adapter on the adapters page, and pauses and resumes a workflow on its page.
// Plain forms: `make e2e` runs this with JavaScript and again without it.
const user = process.env.E2E_USER ?? 'e2e-approver';
const password = process.env.E2E_PASSWORD ?? '';

async function signIn(page: Page, as = user, secret = password) {
  await page.goto('/sign-in');
  await page.getByLabel('Username').fill(as);
  await page.getByLabel('Password').fill(secret);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await expect(page.getByTestId('signed-in')).toBeVisible();
}

test('an approver holds an adapter with a reason and resumes it at a ramp', async ({ page }) => {
  await signIn(page);
  await page.getByRole('link', { name: 'Adapters' }).click();
  const card = page.locator('[data-adapter="queryable-reviewed"]');
  await expect(card.getByTestId('sending')).toHaveText(/^sends/);

  await card.getByLabel('Reason (recorded in the audit log)').fill('provider status page: elevated errors');
  await card.getByRole('button', { name: 'Hold queryable-reviewed' }).click();
  await expect(page.getByTestId('notice')).toContainText('no new request leaves for queryable-reviewed');
  await expect(card.getByTestId('held')).toContainText('provider status page: elevated errors');
  await expect(card.getByTestId('sending')).toHaveText('held: sends nothing new');

  await card.getByLabel('Reason (recorded in the audit log)').fill('provider recovered');
  await card.getByLabel(/Ramp/).fill('5');
  await card.getByRole('button', { name: 'Resume queryable-reviewed' }).click();
  await expect(page.getByTestId('notice')).toContainText('Resumed queryable-reviewed');
  await expect(card.getByTestId('held')).toHaveCount(0);

  await page.goto('/audit');
  await expect(page.getByRole('table').locator('tr', { hasText: 'provider recovered' })).toBeVisible();
});

test('an approver pauses a workflow on its page and resumes it', async ({ page }) => {
  await signIn(page);
  const row = page.getByTestId('found').locator('tr', { hasText: 'deliver' }).first();
  await expect(async () => {
    await page.goto('/?q=demo-letter-3');
    await expect(row).toBeVisible({ timeout: 1000 });
  }).toPass({ timeout: 30_000 });
  await row.getByRole('link', { name: 'deliver' }).click();
  await page.getByRole('link', { name: 'The workflow' }).click();
  await expect(page.getByRole('heading', { name: 'Workflow demo-letter-3' })).toBeVisible();

  await page.getByLabel(/reason/).fill('the customer asked us to wait');
  await page.getByRole('button', { name: 'Pause workflow' }).click();
  await expect(page.getByTestId('notice')).toContainText('Paused: no step of this workflow starts');
  await expect(page.getByTestId('paused')).toContainText('the customer asked us to wait');

  await page.getByLabel(/reason/).fill('the customer confirmed');
  await page.getByRole('button', { name: 'Resume workflow' }).click();
  await expect(page.getByTestId('notice')).toContainText('Resumed');
  await expect(page.getByTestId('paused')).toHaveCount(0);
});

test('an operator leaves a note on a step and the queue finds the step by it', async ({ page }) => {
  await signIn(page);
  const queue = page.getByRole('table', { name: 'Waiting for a person' });
  const first = queue.locator('tbody tr[data-step]').first();
  await expect(first).toBeVisible({ timeout: 30_000 });
  const step = await first.getAttribute('data-step');
  await first.getByRole('link').first().click();

  await page.getByLabel(/Note for the next person/).fill('asked the provider support, ticket 4411');
  await page.getByRole('button', { name: 'Add note' }).click();
  await expect(page.getByTestId('notice')).toContainText('Noted');
  await expect(page.getByTestId('timeline')).toContainText('asked the provider support, ticket 4411');

  await page.goto('/');
  await page.getByLabel('Notes').selectOption('today');
  await page.getByRole('button', { name: 'Apply' }).click();
  await expect(page).toHaveURL(/noted=today/);
  const noted = queue.locator(`tr[data-step="${step}"]`);
  await expect(noted).toBeVisible();
  await expect(noted.getByTestId('noted')).toHaveText('Note');
});

test('an approver limits what reaches an adapter and clears the override', async ({ page }) => {
  await signIn(page);
  await page.getByRole('link', { name: 'Adapters' }).click();
  const card = page.locator('[data-adapter="queryable-reviewed"]');
  await card.getByLabel(/Requests a second/).fill('40');
  await card.getByLabel(/Calls in flight/).fill('4');
  await card.getByLabel('Why limit (recorded in the audit log)').fill('the provider asks for 40 a second');
  await card.getByRole('button', { name: 'Limit queryable-reviewed' }).click();
  await expect(page.getByTestId('notice')).toContainText('queryable-reviewed is limited to 40 requests a second and 4 call(s) in flight');
  await expect(card.getByTestId('limits')).toContainText('the provider asks for 40 a second');

  await card.getByLabel('Why limit (recorded in the audit log)').fill('the provider is fine again');
  await card.getByRole('button', { name: 'Clear the override' }).click();
  await expect(page.getByTestId('notice')).toContainText("queryable-reviewed's override is cleared");
  await expect(card.getByTestId('limits')).toHaveCount(0);
});

test('an operator lists workflows by filter and pauses those listed', async ({ page }) => {
  await signIn(page);
  await page.getByRole('link', { name: 'Workflows' }).click();
  await page.getByLabel('State').selectOption('completed');
  await page.getByRole('button', { name: 'Apply' }).click();
  await expect(page).toHaveURL(/state=completed/);
  const rows = page.getByTestId('workflows').locator('tbody tr');
  await expect(rows.first()).toBeVisible();
  const listed = await rows.count();
  // Completed workflows have nothing left to pause: the pause says so and changes none.
  await page.getByLabel(/Reason \(recorded in the audit log of each\)/).fill('checking the bulk pause');
  await page.getByRole('button', { name: `Pause the ${listed} workflow(s) listed` }).click();
  await expect(page.getByTestId('notice')).toContainText(`Paused 0 workflow(s)`);
  await expect(page.getByTestId('notice')).toContainText(`${listed} left as they were`);
  await expect(page).toHaveURL(/state=completed/);
});

test('a waiver of a charge is proposed by one approver and declined by another', async ({ page, browser }) => {
  await signIn(page);
  const row = page.getByTestId('found').locator('tr', { hasText: 'charge' }).first();
  await expect(async () => {
    await page.goto('/?q=demo-payment-3');
    await expect(row).toBeVisible({ timeout: 1000 });
  }).toPass({ timeout: 30_000 });
  await row.getByRole('link', { name: 'charge' }).click();
  const waive = page.locator('[data-action=waive]');
  await expect(waive.getByTestId('four-eyes')).toContainText('Needs two approvers');
  await waive.getByLabel('Reason (recorded in the audit log)').fill('the customer says the card was charged');
  await waive.getByRole('button', { name: 'Waive' }).click();
  await expect(page.getByTestId('notice')).toContainText('Proposed: Waive needs a second approver');
  await expect(page.getByTestId('proposal')).toContainText('the customer says the card was charged');
  await expect(page.getByTestId('decide-form')).toHaveCount(0);
  const step = page.url();

  // A second approver, made for this test, declines it.
  const env: NodeJS.ProcessEnv = { ...process.env, RUST_LOG: 'warn' };
  delete env.DATABASE_URL;
  const second = `e2e-second-${Date.now()}`;
  const secret = execFileSync(process.env.Z29C_BIN ?? '', ['user', 'add', second, '--role', 'approver'], { env }).toString().trim();
  const context = await browser.newContext({ javaScriptEnabled: test.info().project.use.javaScriptEnabled !== false });
  const other = await context.newPage();
  await signIn(other, second, secret);
  await other.goto(step);
  const decide = other.getByTestId('decide-form');
  await decide.getByLabel(/Your reason/).fill('no receipt yet; ask the provider first');
  await decide.getByRole('button', { name: 'Decline' }).click();
  await expect(other.getByTestId('notice')).toContainText('Declined');
  await expect(other.getByTestId('proposal')).toHaveCount(0);
  await expect(other.getByTestId('state')).toHaveText('Review required');
  await context.close();
});
