import { test, expect, hydrated } from './fixtures';
import type { Page } from '@playwright/test';

// Every button on every step page of the demo either works or is a link. Working means the
// server knows the action and reaches its decision: each form is sent as drawn (required fields
// filled) but as from a page one version old, and must come back with the stale-page sentence,
// never "not an action the console knows". That changes nothing, so it runs with the refusals,
// with JavaScript (the forms are islands) and without.
const user = process.env.E2E_USER ?? 'e2e-approver';
const password = process.env.E2E_PASSWORD ?? '';

// The demo's workflows (server/src/harness/demo/documents.rs and payments.rs).
const DEMO = [
  ...[1, 2, 3].map((n) => `demo-report-${n}`),
  ...[1, 2, 3, 4].map((n) => `demo-invoice-${n}`),
  ...[1, 2, 3, 4, 5, 6].map((n) => `demo-letter-${n}`),
  ...[1, 2, 3, 4].map((n) => `demo-statement-${n}`),
  'demo-notice-1',
  ...[1, 2, 3, 4, 5].map((n) => `demo-payment-${n}`),
];

async function signIn(page: Page) {
  await page.goto('/sign-in');
  await page.getByLabel('Username').fill(user);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await expect(page.getByTestId('signed-in')).toBeVisible();
}

// The addresses of every step of every demo workflow, from each workflow's page.
async function stepPages(page: Page): Promise<string[]> {
  const steps = new Set<string>();
  for (const key of DEMO) {
    await page.goto(`/?q=${key}`);
    await page.getByTestId('found').getByRole('link').first().click();
    const workflow = (await page.getByRole('link', { name: 'The workflow' }).getAttribute('href'))!;
    await page.goto(workflow);
    for (const href of await page.getByTestId('steps').getByRole('link').evaluateAll((links) => links.map((a) => a.getAttribute('href')))) {
      steps.add(href!);
    }
  }
  return [...steps];
}

for (const javaScriptEnabled of [true, false]) {
  const mode = javaScriptEnabled ? 'with JavaScript' : 'without JavaScript';

  test.describe(`step pages ${mode}`, () => {
    test.use({ javaScriptEnabled, allowedFailures: ['/fn/'] });

    test(`every button on every step page works or is a link, ${mode}`, async ({ page }) => {
      test.setTimeout(300_000);
      await signIn(page);
      const pages = await stepPages(page);
      expect(pages.length).toBeGreaterThan(DEMO.length);
      const posted = new Set<string>();
      const linked = new Set<string>();
      for (const step of pages) {
        await page.goto(step);
        await hydrated(page, javaScriptEnabled);
        // No button outside an action's form but the header's sign-out, and the note form's
        // (which writes an audit entry, so controls.spec.ts posts it, not this test).
        await expect(
          page.locator('main button:not([data-action] form button):not([data-testid=note-form] button)'),
        ).toHaveCount(0);
        await expect(page.locator('[data-testid=note-form] button')).toHaveText('Add note');
        const actions = await page.locator('main [data-action]').evaluateAll((cards) =>
          cards.map((c) => [c.getAttribute('data-action')!, c.querySelector('form') !== null] as const),
        );
        for (const [action, hasForm] of actions) {
          const card = page.locator(`main [data-action=${action}]`);
          if (!hasForm) {
            await expect(card.getByRole('link')).toHaveCount(1);
            linked.add(action);
            continue;
          }
          const form = card.locator('form');
          const version = form.locator('input[name=version]');
          const stale = String(Number(await version.getAttribute('value')) - 1);
          await version.evaluate((input, v) => { (input as HTMLInputElement).value = v; }, stale);
          for (const field of await form.locator('textarea[required], input[type=text][required]').all()) {
            if ((await field.inputValue()).trim() === '') await field.fill('checking the button');
          }
          for (const box of await form.locator('input[type=checkbox][required]').all()) await box.check();
          await form.getByRole('button').click();
          // Live, the answer shows in the card; without JavaScript the page comes back with it.
          const refusal = javaScriptEnabled ? card.getByTestId('refusal') : page.getByTestId('refusal');
          await expect(refusal, `${step} ${action}`).toContainText('changed since your page was drawn');
          posted.add(action);
          if (!javaScriptEnabled) await page.goto(step);
          else await hydrated(page);
        }
      }
      // The demo leaves steps offering every action: each form was sent, and the one action
      // resolved elsewhere is a link to its incident.
      expect([...posted].sort()).toEqual([
        'attach_evidence', 'authorize_another_attempt', 'cancel', 'check_destination', 'replace', 'retry_same_key', 'waive',
      ]);
      expect([...linked]).toEqual(['resolve_incident']);
    });
  });
}
