import { execFileSync } from 'node:child_process';
import { test, expect } from './fixtures';
import type { Page } from '@playwright/test';

// An archived workflow (docs/DESIGN.md §21): `z29c archive run` moves every settled demo
// workflow out of the hot tables; the console still finds one by its creation key, shows when it
// was archived and its evidence read back from the archive, and the overview counts it. This runs
// after every other test (its own project): the workflows it archives leave the other pages.
const user = process.env.E2E_USER ?? 'e2e-approver';
const password = process.env.E2E_PASSWORD ?? '';
const bin = process.env.Z29C_BIN ?? '';

function z29c(args: string[]): string {
  // Joins the server's private cluster and writes to the archive the server reads.
  const env: NodeJS.ProcessEnv = { ...process.env, RUST_LOG: 'warn' };
  delete env.DATABASE_URL;
  return execFileSync(bin, args, { env }).toString();
}

async function signIn(page: Page) {
  await page.goto('/sign-in');
  await page.getByLabel('Username').fill(user);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await expect(page.getByTestId('signed-in')).toBeVisible();
}

test('an archived workflow is found by its creation key and read back from the archive with its evidence', async ({ page }) => {
  expect(bin, 'run.sh passes Z29C_BIN').not.toEqual('');
  const completed = () =>
    z29c(['workflow', 'list', '--state', 'completed', '--limit', '500', '--json'])
      .split('\n')
      .filter((line) => line.startsWith('{"id"'))
      .map((line) => JSON.parse(line));
  const before = completed();
  expect(before.length, 'the demo leaves completed workflows').toBeGreaterThan(0);
  const moved = JSON.parse(z29c(['archive', 'run', '--retain-settled', '0s', '--json']));
  expect(moved.workflows).toBeGreaterThan(0);
  // Those whose provider still keeps their keys (the payments demo's, a day) stay.
  const still = new Set(completed().map((w) => w.id));
  const workflow = before.find((w) => !still.has(w.id));
  expect(workflow, 'a completed workflow left for the archive').toBeTruthy();

  await signIn(page);
  await page.goto(`/workflows?key=${encodeURIComponent(workflow.creation_key)}`);
  const row = page.getByRole('row', { name: workflow.creation_key });
  await expect(row).toContainText('archived');
  await page.goto(`/workflows/${workflow.id}`);
  await expect(page.getByTestId('archived')).toContainText(/^Archived on \d{4}-\d\d-\d\d/);
  await expect(page.getByTestId('evidence')).toContainText('receipt for');
  await expect(page.getByTestId('evidence')).toContainText('start_workflow');
  // Its steps are no longer in the hot tables: listed, not linked.
  await expect(page.getByTestId('steps').getByRole('link')).toHaveCount(0);

  await page.goto('/overview');
  await expect(page.getByTestId('archive-card')).toContainText(`${moved.workflows} workflow(s)`);
  const verified = JSON.parse(z29c(['archive', 'verify', '--json']));
  expect(verified.findings).toEqual([]);
});
