import { readFileSync } from 'node:fs';
import { test, expect, hydrated, z29c, bin } from './fixtures';
import type { Browser, Page } from '@playwright/test';

// A claim the sandbox refutes permits nothing: once `z29c adapter verify` has seen the
// `idempotent-reviewed` adapter's key ignored, its step in review offers no "Retry with the same
// key", with JavaScript and without. This runs last (its own project after `console`): it changes
// what the adapter may do for every later step.
const user = process.env.E2E_USER ?? 'e2e-approver';
const password = process.env.E2E_PASSWORD ?? '';
const demoData = process.env.Z29C_DEMO_DATA ?? '';
const demoPort = Number(process.env.Z29C_E2E_DEMO_PORT ?? '3201');

async function signIn(page: Page) {
  await page.goto('/sign-in');
  await page.getByLabel('Username').fill(user);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await expect(page.getByTestId('signed-in')).toBeVisible();
}

async function stepPage(browser: Browser, step: string, javaScriptEnabled: boolean) {
  const context = await browser.newContext({ javaScriptEnabled });
  const page = await context.newPage();
  await signIn(page);
  await page.goto(`/steps/${step}`);
  await hydrated(page, javaScriptEnabled);
  return { context, page };
}

test('a key the sandbox refutes leaves its step in review without a same-key retry, with and without JavaScript', async ({ browser, request }) => {
  expect(bin, 'run.sh passes Z29C_BIN').not.toEqual('');
  const secret = z29c(['token', 'create', 'e2e-trust', '--role', 'operator']).trim();
  expect(secret, 'z29c token create printed the token alone').not.toContain(' ');
  const control = readFileSync(`${demoData}/control-token`, 'utf8').trim();
  const idempotent = `http://127.0.0.1:${demoPort}`;
  const opaque = `http://127.0.0.1:${demoPort + 2}`;
  // The idempotent destination takes the next delivery and loses its answer.
  const faulted = await request.put(`${idempotent}/control/faults`, {
    headers: { authorization: `Bearer ${control}` },
    data: { rules: [{ operation: 'deliver', match: { any: true }, fault: { drop_response: {} }, times: 1 }] },
  });
  expect(faulted.ok(), await faulted.text()).toBeTruthy();
  const started = await request.post('/api/v1/workflows', {
    headers: { authorization: `Bearer ${secret}` },
    data: {
      creation_key: 'e2e-trust-1',
      definition: 'document_delivery',
      input: { adapter: 'idempotent-reviewed', recipient: 'r-trust', document: { title: 'Trust', body: 'b' } },
    },
  });
  expect(started.status(), await started.text()).toBe(201);
  const workflow = (await started.json()).id;
  let step = '';
  await expect(async () => {
    const shown = await (await request.get(`/api/v1/workflows/${workflow}`, { headers: { authorization: `Bearer ${secret}` } })).json();
    const deliver = shown.steps.find((s: { logical: string }) => s.logical === 'deliver');
    expect(deliver.state).toBe('review_required');
    step = deliver.id;
  }).toPass({ timeout: 30_000 });

  // Before: the key is verified, and the step offers the retry.
  const before = await stepPage(browser, step, true);
  await expect(before.page.locator('[data-action=retry_same_key]')).toBeVisible();
  await before.context.close();

  // Verified again against a sandbox that ignores keys: the claim is refuted.
  const verified = z29c(['adapter', 'verify', 'idempotent-reviewed', '--sandbox', opaque]);
  expect(verified).toContain('idempotency key: refuted');

  for (const javaScriptEnabled of [true, false]) {
    const { context, page } = await stepPage(browser, step, javaScriptEnabled);
    await expect(page.getByTestId('state')).toHaveText('Review required');
    await expect(page.locator('[data-action=retry_same_key]')).toHaveCount(0);
    await expect(page.getByTestId('claims').locator('[data-trust=refuted]')).toContainText('idempotency key: refuted');
    await expect(page.getByTestId('claims').locator('[data-trust=refuted]')).toContainText('the same key made');
    await context.close();
  }
});
