import { test, expect, hydrated } from './fixtures';
import type { Locator, Page } from '@playwright/test';

// Every kind of refusal, with JavaScript (the step page's action forms are islands that post in
// place) and without it (every form posts, and the server redirects back to the page): either
// way the refusal lands on a console page that says why, with what was typed still in the form.
// Refusals change nothing, so these run first (playwright.config.ts), on steps the demo left
// for review that other tests act on later.
const user = process.env.E2E_USER ?? 'e2e-approver';
const password = process.env.E2E_PASSWORD ?? '';

const STALE = 'changed since your page was drawn';

async function signIn(page: Page) {
  await page.goto('/sign-in');
  await page.getByLabel('Username').fill(user);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await expect(page.getByTestId('signed-in')).toBeVisible();
}

// Opens `workflow`'s step `logical` once the demo has left it in `state`, found by search.
async function openStep(page: Page, workflow: string, logical: string, state: string) {
  const row = page.getByTestId('found').locator('tr', { hasText: logical }).first();
  await expect(async () => {
    await page.goto(`/?q=${workflow}`);
    await expect(row).toContainText(state, { timeout: 1000 });
  }).toPass({ timeout: 30_000 });
  await row.getByRole('link', { name: logical }).click();
  await expect(page.getByRole('heading', { name: `${workflow} · ${logical}` })).toBeVisible();
}

function card(page: Page, action: string) {
  return page.locator(`[data-action=${action}]`);
}

// Clicks `button` of a step action's form and checks which way the post went: live, the island
// posts in place and gets the refusal's status; without JavaScript the browser posts the form and
// is sent back to the page (303).
async function post(page: Page, button: Locator, javaScriptEnabled: boolean) {
  const [answer] = await Promise.all([
    page.waitForResponse((r) => new URL(r.url()).pathname.startsWith('/fn/act_on_step')),
    button.click(),
  ]);
  if (javaScriptEnabled) expect(answer.status()).toBeGreaterThanOrEqual(400);
  else expect(answer.status()).toBe(303);
}

// Sets a hidden field as an older page (or a forger) would have it.
async function setHidden(form: Locator, name: string, value: (old: string) => string) {
  const field = form.locator(`input[name=${name}]`);
  const old = (await field.getAttribute('value')) ?? '';
  await field.evaluate((input, v) => (input as HTMLInputElement).setAttribute('value', v), value(old));
  await field.evaluate((input, v) => { (input as HTMLInputElement).value = v; }, value(old));
}

// A step action's form refused for what was typed: [workflow, logical step, state it waits in,
// action, fields to fill (label → value), the sentence].
type Typed = [string, string, string, string, Record<string, string>, string];
const VALIDATION: Typed[] = [
  ['demo-statement-2', 'deliver', 'Review required', 'check_destination', { 'Reason (recorded in the audit log)': '   ' }, 'A reason is required.'],
  ['demo-statement-3', 'deliver', 'Review required', 'retry_same_key', { 'Reason (recorded in the audit log)': '  ' }, 'A reason is required.'],
  ['demo-letter-2', 'deliver', 'Review required', 'attach_evidence', {
    'External reference at the destination': 'x-desk-12',
    'Evidence (what you saw, and where)': '   ',
    'Reason (recorded in the audit log)': 'the support desk read it out',
  }, 'Evidence is required.'],
  ['demo-letter-2', 'deliver', 'Review required', 'waive', {
    'Residual uncertainty (what remains unknown)': '  ',
    'Reason (recorded in the audit log)': 'not needed any more',
  }, 'The residual uncertainty is required.'],
  ['demo-letter-2', 'deliver', 'Review required', 'authorize_another_attempt', { 'Reason (recorded in the audit log)': ' ' }, 'A reason is required.'],
  ['demo-letter-2', 'deliver', 'Review required', 'cancel', { 'Reason (recorded in the audit log)': '   ' }, 'A reason is required.'],
  ['demo-payment-2', 'charge', 'Rejected', 'replace', {
    'Corrected input (JSON; the new digest shows on both steps)': '{"amount": 2500,',
    'Reason (recorded in the audit log)': 'the amount was wrong',
  }, 'The corrected input is not JSON'],
];

for (const javaScriptEnabled of [true, false]) {
  const mode = javaScriptEnabled ? 'with JavaScript' : 'without JavaScript';

  test.describe(`refusals ${mode}`, () => {
    test.use({ javaScriptEnabled, allowedFailures: ['/fn/'] });

    test(`a wrong password is refused ${mode}, the username kept and the password not`, async ({ page }) => {
      await page.goto('/sign-in');
      await hydrated(page, javaScriptEnabled);
      await page.getByLabel('Username').fill(user);
      await page.getByLabel('Password').fill('not the password');
      await page.getByRole('button', { name: 'Sign in' }).click();
      await expect(page.getByRole('alert')).toHaveText('Unknown username or wrong password.');
      await expect(page.getByLabel('Username')).toHaveValue(user);
      await expect(page.getByLabel('Password')).toHaveValue('');
      await expect(page.getByRole('heading', { name: 'Sign in' })).toBeVisible();
    });

    test(`a sign-in with a forged token is refused ${mode}`, async ({ page }) => {
      await page.goto('/sign-in');
      await hydrated(page, javaScriptEnabled);
      await setHidden(page.locator('form').filter({ has: page.getByLabel('Password') }), 'csrf', () => 'forged');
      await page.getByLabel('Username').fill(user);
      await page.getByLabel('Password').fill(password);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await expect(page.getByRole('alert')).toContainText('did not come from this console');
      await expect(page.getByLabel('Username')).toHaveValue(user);
      await expect(page.getByTestId('signed-in')).toHaveCount(0);
    });

    for (const [workflow, logical, state, action, fields, sentence] of VALIDATION) {
      test(`${action} refuses what was typed ${mode}, and keeps it`, async ({ page }) => {
        await signIn(page);
        await openStep(page, workflow, logical, state);
        await hydrated(page, javaScriptEnabled);
        const form = card(page, action);
        for (const [label, value] of Object.entries(fields)) await form.getByLabel(label).fill(value);
        if (action === 'authorize_another_attempt') await form.getByRole('checkbox').check();
        await post(page, form.getByRole('button'), javaScriptEnabled);
        await expect(card(page, action).getByTestId('refusal')).toContainText(sentence);
        for (const [label, value] of Object.entries(fields)) {
          await expect(card(page, action).getByLabel(label)).toHaveValue(value);
        }
        if (action === 'authorize_another_attempt') await expect(card(page, action).getByRole('checkbox')).toBeChecked();
        await expect(page.getByTestId('state')).toHaveText(state === 'Rejected' ? 'Rejected by the destination' : state);
      });
    }

    test(`a stale page is refused ${mode}, what was typed kept`, async ({ page }) => {
      await signIn(page);
      await openStep(page, 'demo-letter-3', 'deliver', 'Review required');
      await hydrated(page, javaScriptEnabled);
      // Drawn one version ago: as if another operator had acted since.
      const form = card(page, 'waive');
      await setHidden(form, 'version', (v) => String(Number(v) - 1));
      await form.getByLabel('Reason (recorded in the audit log)').fill('from an old tab');
      await post(page, form.getByRole('button', { name: 'Waive' }), javaScriptEnabled);
      await expect(card(page, 'waive').getByTestId('refusal')).toContainText(STALE);
      await expect(card(page, 'waive').getByLabel('Reason (recorded in the audit log)')).toHaveValue('from an old tab');
      await expect(page.getByTestId('state')).toHaveText('Review required');
    });

    test(`an action the contract forbids is refused ${mode}, what was written kept`, async ({ page }) => {
      await signIn(page);
      await openStep(page, 'demo-letter-3', 'deliver', 'Review required');
      await hydrated(page, javaScriptEnabled);
      // An opaque adapter never allows a retry under the same key: a form forged to ask for one.
      const form = card(page, 'cancel');
      await setHidden(form, 'action', () => 'retry_same_key');
      await form.getByLabel('Reason (recorded in the audit log)').fill('retry it anyway');
      await post(page, form.getByRole('button', { name: 'Cancel' }), javaScriptEnabled);
      const refusal = page.getByTestId('refusal');
      await expect(refusal).toContainText('is not permitted for a step that is review required');
      if (javaScriptEnabled) {
        // The live form is still there as typed.
        await expect(card(page, 'cancel').getByLabel('Reason (recorded in the audit log)')).toHaveValue('retry it anyway');
      } else {
        // The page offers no such action: the refusal is said at the top, with what was written.
        await expect(page.getByTestId('kept')).toContainText('retry it anyway');
      }
      await expect(page.getByTestId('state')).toHaveText('Review required');
    });

    test(`a forged form token is refused ${mode}, what was typed kept`, async ({ page }) => {
      await signIn(page);
      await openStep(page, 'demo-letter-3', 'deliver', 'Review required');
      await hydrated(page, javaScriptEnabled);
      const form = card(page, 'attach_evidence');
      await setHidden(form, 'csrf', () => 'forged');
      await form.getByLabel('External reference at the destination').fill('x-forged-1');
      await form.getByLabel('Evidence (what you saw, and where)').fill('nothing real');
      await form.getByLabel('Reason (recorded in the audit log)').fill('forged');
      await post(page, form.getByRole('button', { name: 'Attach evidence' }), javaScriptEnabled);
      await expect(card(page, 'attach_evidence').getByTestId('refusal')).toContainText('did not come from this console');
      await expect(card(page, 'attach_evidence').getByLabel('External reference at the destination')).toHaveValue('x-forged-1');
      await expect(page.getByTestId('receipt')).toHaveText('none: no receipt proves the effect');
    });

    test(`an incident's resolution without a reason is refused ${mode}, the choices kept`, async ({ page }) => {
      await signIn(page);
      const incidents = page.getByRole('table', { name: 'Open integrity incidents' });
      await expect(async () => {
        await page.goto('/');
        await expect(incidents.locator('tr', { hasText: 'demo-invoice-3' })).toBeVisible({ timeout: 1000 });
      }).toPass({ timeout: 30_000 });
      await incidents.locator('tr', { hasText: 'demo-invoice-3' }).getByRole('link').click();
      await hydrated(page, javaScriptEnabled);
      const first = page.getByTestId('references').locator('tbody tr').first().locator('code').first();
      const canonical = (await first.textContent())!;
      await page.getByLabel(canonical).check();
      await page.getByLabel(/Accept it as unresolved/).check();
      await page.getByLabel('Reason (recorded in the audit log)').fill('  ');
      await page.getByRole('button', { name: 'Resolve incident' }).click();
      await expect(page.getByTestId('refusal')).toContainText('A reason is required.');
      await expect(page.getByLabel(canonical)).toBeChecked();
      await expect(page.getByLabel(/Accept it as unresolved/)).toBeChecked();
      await expect(page.getByTestId('resolution')).toHaveCount(0);
    });

    test(`a bulk run without a reason is refused ${mode}, the rate kept`, async ({ page }) => {
      await signIn(page);
      await expect(async () => {
        await page.goto('/bulk?action=cancel&definition=document_delivery&state=review_required');
        await expect(page.getByTestId('bulk-count')).toContainText(/[1-9]\d* permitted for Cancel/, { timeout: 1000 });
      }).toPass({ timeout: 30_000 });
      await hydrated(page, javaScriptEnabled);
      await page.getByLabel('Rate (steps per second)').fill('7');
      await page.getByLabel('Reason (recorded in the audit log for every row)').fill('   ');
      await page.getByRole('button', { name: /^Cancel on these/ }).click();
      await expect(page.getByTestId('refusal')).toContainText('A reason is required.');
      await expect(page.getByLabel('Rate (steps per second)')).toHaveValue('7');
      await expect(page).toHaveURL(/\/bulk\?/);
    });
  });
}
