// The operator's node list (issue 16, link monitoring), in Chromium
// against two real nodes on one NATS (A embeds it and listens, B connects):
// the key entered from the keyboard, the home page lists both nodes, and
// each one's row names the other with a measured delay.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { artifacts, freePort, launch, startNode } from './harness.mjs';

let a, b, browser;
before(async () => {
  const nats = await freePort();
  a = await startNode(['-node-id', 'node-a', '-nats-listen', `127.0.0.1:${nats}`]);
  b = await startNode(['-node-id', 'node-b', '-nats-url', `nats://127.0.0.1:${nats}`]);
  browser = await launch();
});
after(async () => {
  await browser?.close();
  b?.stop();
  a?.stop();
});

test('the home page shows each node delay to the other', async () => {
  const page = await browser.newPage();
  await page.goto(a.url + '/');
  await page.getByLabel('API key').focus();
  await page.keyboard.type(a.key);
  await page.keyboard.press('Enter');
  const table = page.getByRole('table');
  await table.waitFor({ timeout: 30_000 });
  for (const [self, other] of [
    ['node-a', 'node-b'],
    ['node-b', 'node-a'],
  ]) {
    const row = page.getByTestId('node-' + self);
    await row.getByText(new RegExp(`${other}: \\d+(\\.\\d)? ms`)).waitFor({ timeout: 30_000 });
    assert.match(await row.getByRole('rowheader').textContent(), new RegExp(self));
  }
  await page.screenshot({ path: join(artifacts, 'nodes.png'), fullPage: true });
});
