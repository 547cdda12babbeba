import { test, expect, hydrated } from './fixtures';

const user = process.env.E2E_USER ?? 'e2e-approver';
const password = process.env.E2E_PASSWORD ?? '';

test('an operator signs in and out', async ({ page }) => {
  await page.goto('/sign-in');
  await hydrated(page);
  await page.getByLabel('Username').fill(user);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await expect(page).toHaveURL(/\/$/);
  await expect(page.getByTestId('signed-in')).toHaveText(`Signed in as ${user} (approver)`);

  await page.getByRole('button', { name: 'Sign out' }).click();
  await expect(page).toHaveURL(/\/sign-in$/);
  await expect(page.getByRole('link', { name: 'Sign in' })).toBeVisible();
});

test.describe('a refused sign-in', () => {
  test.use({ allowedFailures: ['/fn/sign_in'] });

test('a wrong password is refused with a clear sentence', async ({ page }) => {
  await page.goto('/sign-in');
  await hydrated(page);
  await page.getByLabel('Username').fill(user);
  await page.getByLabel('Password').fill('not the password');
  await page.getByRole('button', { name: 'Sign in' }).click();
  await expect(page.getByRole('alert')).toHaveText('Unknown username or wrong password.');
  await expect(page.getByRole('link', { name: 'Sign in' })).toBeVisible();
});

test('a forged sign-in without the session token is refused', async ({ page, request }) => {
  await page.goto('/sign-in');
  const action = await page.locator('form').first().getAttribute('action');
  const response = await request.post(action!, {
    form: { username: user, password, csrf: 'forged' },
    headers: { Accept: 'application/json' },
  });
  expect(response.status()).toBe(409);
  expect(await response.text()).toContain('did not come from this console');
});
});

test('signing in works without JavaScript too', async ({ browser }) => {
  const context = await browser.newContext({ javaScriptEnabled: false });
  const page = await context.newPage();
  await page.goto('/sign-in');
  await page.getByLabel('Username').fill(user);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await expect(page.getByTestId('signed-in')).toHaveText(`Signed in as ${user} (approver)`);
  await context.close();
});
