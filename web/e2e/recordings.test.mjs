// Recording from the meeting and the recordings catalog (issue 15), in
// Chromium against a real node: the chair records, everyone sees it, the
// operator finds, renames and deletes the recording.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { artifacts, joinThroughUI, launch, startNode, waitFor } from './harness.mjs';

let node, browser;
before(async () => {
  node = await startNode(['-recording-capacity-mbps', '1000']); // no disk probe
  browser = await launch();
});
after(async () => {
  await browser?.close();
  node?.stop();
});

async function link(sid, role) {
  const t = await node.api('POST', `/sessions/${sid}/tokens`, { role });
  return `${node.url}/join/${sid}#t=${encodeURIComponent(t.token)}`;
}

test('the chair records a meeting; the catalog lists, finds, renames and deletes it', { timeout: 120_000 }, async () => {
  const s = await node.api('POST', '/sessions', { name: 'design review' });
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const chair = await joinThroughUI(ctx, await link(s.id, 'chair'), 'Ada');
  const guest = await joinThroughUI(ctx, await link(s.id, 'participant'), 'Bob');
  // Only the chair has the control; a participant cannot record.
  assert.equal(await guest.getByRole('button', { name: 'Record the session' }).count(), 0);
  await chair.getByRole('button', { name: 'Record the session' }).click();
  // Everyone sees that the meeting is being recorded (text, not colour).
  await chair.getByRole('status').filter({ hasText: 'Recording' }).waitFor({ timeout: 10_000 });
  await guest.getByRole('status').filter({ hasText: 'Recording' }).waitFor({ timeout: 10_000 });
  // Let both members' media be recorded for a few seconds.
  await waitFor(async () => {
    const r = (await node.api('GET', `/sessions/${s.id}/recordings`)).recordings;
    return r.length === 1 && r[0].streams >= 2 && r[0];
  }, 20_000, 'the recording to hold both members\' streams');
  await new Promise((r) => setTimeout(r, 2000));
  await chair.getByRole('button', { name: 'Stop recording the session' }).click();
  await guest.getByRole('status').filter({ hasText: 'Recording' }).waitFor({ state: 'detached', timeout: 10_000 });
  await ctx.close();

  // The operator's catalog.
  const ops = await (await browser.newContext()).newPage();
  await ops.goto(node.url + '/');
  await ops.getByLabel('API key').fill(node.key);
  await ops.getByRole('button', { name: 'Continue' }).click();
  await ops.getByRole('link', { name: 'Recordings' }).click();
  const list = ops.getByRole('list', { name: 'Recordings' });
  await list.waitFor();
  const item = list.getByRole('listitem').first();
  await waitFor(async () => /finished/.test(await item.textContent()), 10_000, 'the recording shown finished');
  const text = await item.textContent();
  assert.match(text, /Meeting of/);
  assert.match(text, /\d+ streams/);
  assert.match(text, /\d+(\.\d)? (KB|MB)/);
  // Search: a word that is not there, then one that is.
  await ops.getByLabel('Search titles and descriptions').fill('nothing-like-this');
  await ops.keyboard.press('Enter');
  await ops.getByText('No recording matches').waitFor();
  await ops.getByLabel('Search titles and descriptions').fill('meeting');
  await ops.keyboard.press('Enter');
  await list.waitFor();
  await ops.getByLabel('Search titles and descriptions').fill('');
  await ops.keyboard.press('Enter');
  // Rename from the keyboard.
  await list.getByRole('button', { name: /^Rename/ }).focus();
  await ops.keyboard.press('Enter');
  await ops.getByLabel('Title', { exact: true }).fill('Design review, week 48');
  await ops.getByLabel('Description', { exact: true }).fill('Ada and Bob on the recorder');
  await ops.getByRole('button', { name: 'Save' }).click();
  await ops.getByText('Design review, week 48', { exact: true }).waitFor();
  // Play: the recording, exported as WebM, plays in the page (its video
  // decodes and time advances).
  await ops.getByRole('button', { name: /^Play/ }).click();
  const player = ops.getByTestId('player');
  await player.waitFor({ timeout: 30_000 });
  let seen;
  await waitFor(
    async () => {
      seen = await player.evaluate((v) => ({ state: v.readyState, t: v.currentTime, w: v.videoWidth, d: v.duration, ended: v.ended, paused: v.paused, err: v.error && v.error.message }));
      return seen.state >= 2 && seen.t > 0.5 && seen.w > 0 && seen;
    },
    20_000,
    'the recording to play in the page',
  ).catch(async (e) => {
    const recs = (await node.api('GET', '/recordings')).recordings;
    throw new Error(`${e.message}; the player: ${JSON.stringify(seen)}; the catalog: ${JSON.stringify(recs)}`);
  });
  await ops.screenshot({ path: join(artifacts, 'recordings.png') });
  if (process.env.SCREENSHOT_RECORDINGS) await ops.screenshot({ path: process.env.SCREENSHOT_RECORDINGS });
  // Download: an Ogg/Opus file of its audio.
  const [dl] = await Promise.all([
    ops.waitForEvent('download'),
    ops.getByRole('combobox', { name: /^Download/ }).selectOption('ogg'),
  ]);
  assert.match(dl.suggestedFilename(), /\.ogg$/);
  const file = await dl.path();
  const { statSync } = await import('node:fs');
  assert.ok(statSync(file).size > 1000, 'the Ogg file is ' + statSync(file).size + ' bytes');
  const [rec] = (await node.api('GET', '/recordings')).recordings;
  assert.equal(rec.title, 'Design review, week 48');
  assert.equal(rec.description, 'Ada and Bob on the recorder');
  // Delete asks once more, then the recording and its files are gone.
  await ops.getByRole('button', { name: /^Delete/ }).click();
  await ops.getByRole('button', { name: 'Delete for good' }).click();
  await ops.getByText('No recordings yet').waitFor();
  assert.equal((await node.api('GET', '/recordings')).recordings.length, 0);
});
