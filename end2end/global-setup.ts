import type { FullConfig } from '@playwright/test';

// Waits until the server under test says it is ready (database reachable, schema current).
export default async function globalSetup(config: FullConfig) {
  const baseURL = config.projects[0].use.baseURL as string;
  const deadline = Date.now() + 120_000;
  let last = 'no answer';
  while (Date.now() < deadline) {
    try {
      const response = await fetch(`${baseURL}/readyz`);
      if (response.ok) return;
      last = `${response.status} ${await response.text()}`;
    } catch (error) {
      last = String(error);
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  throw new Error(`the server at ${baseURL} did not become ready: ${last}`);
}
