import { test, expect } from './fixtures';
import type { Page } from '@playwright/test';

// The controls over more than one step (docs/DESIGN.md §20), in the browser: an approver holds
// and resumes an adapter on the adapters page, and pauses and resumes a workflow on its page.
// Plain forms: `make e2e` runs this with JavaScript and again without it.
const user = process.env.E2E_USER ?? 'e2e-approver';
const password = process.env.E2E_PASSWORD ?? '';

async function signIn(page: Page) {
  await page.goto('/sign-in');
  await page.getByLabel('Username').fill(user);
  await page.getByLabel('Password').fill(password);
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
