// HLS for passive viewers (issue 18), in Chromium against a real node:
// ffmpeg sends a tone (PCMU) and a test card (VP8) into a session over
// plain RTP, the operator starts the session's HLS, and a viewer page
// opened with the viewer link of the operator's session list (a view
// token, which cannot join) plays it with hls.js in its low-latency mode:
// its time advances, it decodes frames, it reloads the playlist blocking
// for parts (_HLS_part) and fetches them, and it plays within 3 s of the
// live edge. A page with a bad token says so; once the link is revoked,
// its page stops playing and says the link is not valid.
//
// The chair broadcasts the meeting: with the same feed beside two browser
// members, the chair's page starts the broadcast and copies a viewer link
// (a view token the chair issues, refused as a member); a viewer in another browser
// context plays it; the participant's page shows Live but no broadcast
// control, and the API refuses its start and its tokens; when the chair
// stops, the participant's Live goes and the viewer page says the
// broadcast has ended. A node without ffmpeg: the chair reads why it
// cannot broadcast.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { feedTestCard, joinThroughUI, launch, startNode, waitFor, watchPlays } from './harness.mjs';

let node, browser;
const feeds = []; // ffmpeg children
before(async () => {
  node = await startNode();
  browser = await launch();
});
after(async () => {
  feeds.forEach((f) => f.kill('SIGKILL'));
  await browser?.close();
  node?.stop();
});

test('a viewer plays the session with hls.js', { timeout: 120_000 }, async () => {
  const s = await node.api('POST', '/sessions', { name: 'hls' });
  feeds.push(await feedTestCard(node, s.id));
  const started = await node.api('POST', `/sessions/${s.id}/hls`, {});
  assert.equal(started.playlist, `/hls/${s.id}/index.m3u8`);

  // The operator's session list gives the viewer link.
  const ops = await (await browser.newContext()).newPage();
  await ops.goto(node.url + '/');
  await ops.getByLabel('API key').fill(node.key);
  await ops.getByRole('button', { name: 'Continue' }).click();
  await ops.getByTestId('session-hls').getByRole('button', { name: 'Share viewer link for hls' }).click();
  const link = await ops.getByTestId('viewer-link').inputValue();
  assert.match(link, new RegExp(`^${node.url}/watch/${s.id}#t=cv1\\.`));
  const tokens = await node.api('GET', `/sessions/${s.id}/tokens`);
  const view = tokens.tokens.filter((t) => t.role === 'viewer');
  assert.equal(view.length, 1, 'the link is a view token');
  await cannotJoin(node, s.id, link);

  const page = await (await browser.newContext()).newPage();
  // The player's requests: LL-HLS has it reload the playlist blocking
  // (_HLS_msn, _HLS_part) and fetch parts.
  const asked = [];
  page.on('request', (r) => asked.push(r.url()));
  const opened = Date.now();
  await page.goto(link);
  const { st, later } = await watchPlays(page, node, s.id);
  assert.equal(st.w, 640, 'the video is the stream’s 640×360 frame (the 320×240 test card scaled to fit)');
  assert.ok(later.frames > st.frames, 'frames go on being decoded; node log: ' + node.log().slice(-3000));
  assert.ok(asked.some((u) => /_stream\.m3u8\?.*_HLS_msn=\d+&_HLS_part=\d+/.test(u)), 'blocking playlist reloads for parts');
  assert.ok(asked.some((u) => /_part\d+\.mp4/.test(u)), 'parts fetched');
  // Low latency: hls.js plays within 3 s of the live edge (the page
  // shows how far behind it is).
  let seen = [];
  const latency = await waitFor(async () => {
    const v = Number(await page.getByTestId('watch-latency').getAttribute('data-seconds', { timeout: 1000 }).catch(() => NaN));
    seen = [...seen.slice(-9), v];
    return v > 0 && v < 3 ? v : null;
  }, 20_000, 'the player within 3 s of the live edge').catch((e) => {
    throw new Error(`${e.message}; the page's latencies ${seen.join(' ')}`);
  });
  const parts = asked.filter((u) => /_part\d+\.mp4/.test(u)).length;
  const playing = (Date.now() - opened) / 1000;
  // Where it settles: five more readings, a second apart.
  const settled = [];
  for (let i = 0; i < 5; i++) {
    await new Promise((r) => setTimeout(r, 1000));
    settled.push(Number(await page.getByTestId('watch-latency').getAttribute('data-seconds')));
  }
  console.log(`viewer: ${latency.toFixed(2)} s behind the live edge ${playing.toFixed(1)} s after the page opened, then ${settled.join(' ')} s; ${parts} parts fetched`);
  if (process.env.SCREENSHOT_WATCH) await page.screenshot({ path: process.env.SCREENSHOT_WATCH });

  // Revoking the link stops its page within seconds: the playlist under
  // the link's signed prefix answers 401, and the page says so.
  await node.api('DELETE', `/sessions/${s.id}/tokens/${view[0].id}`);
  await page.getByRole('alert').waitFor({ timeout: 30_000 });
  assert.match(await page.getByRole('alert').textContent(), /not valid/);

  const bad = await (await browser.newContext()).newPage();
  await bad.goto(`${node.url}/watch/${s.id}#t=cv1.forged`);
  await bad.getByRole('alert').waitFor({ timeout: 30_000 });
  assert.match(await bad.getByRole('alert').textContent(), /not valid/);
});

// cannotJoin asserts that a viewer link's token is refused as a member,
// with the reason.
async function cannotJoin(n, sid, link) {
  const token = decodeURIComponent(new URL(link).hash.replace(/^#t=/, ''));
  const r = await fetch(`${n.url}/api/v1/sessions/${sid}/members`, {
    method: 'POST', headers: { 'Content-Type': 'application/json', Authorization: 'Bearer ' + token }, body: JSON.stringify({ name: 'sneaky' }),
  });
  assert.equal(r.status, 403, 'a viewer link joins no member');
  assert.match((await r.json()).error.message, /only watches/);
}

const joinLink = async (n, s, role) => {
  const { token } = await n.api('POST', `/sessions/${s}/tokens`, { role });
  return `${n.url}/join/${s}#t=${encodeURIComponent(token)}`;
};

// refused calls the API with a member token and returns the status.
const refused = async (n, method, path, body, token) => {
  const r = await fetch(`${n.url}/api/v1${path}`, {
    method, headers: { 'Content-Type': 'application/json', Authorization: 'Bearer ' + token }, body: JSON.stringify(body),
  });
  return r.status;
};

test('the chair broadcasts, a viewer watches, a participant sees Live', { timeout: 180_000 }, async () => {
  const s = await node.api('POST', '/sessions', { name: 'broadcast' });
  feeds.push(await feedTestCard(node, s.id, 150));
  const chair = await joinThroughUI(await browser.newContext(), await joinLink(node, s.id, 'chair'), 'Ada');
  const part = await joinThroughUI(await browser.newContext(), await joinLink(node, s.id, 'participant'), 'Bob');

  // The participant has no broadcast control, and the API refuses it.
  assert.equal(await part.getByRole('button', { name: 'Start broadcast' }).count(), 0);
  assert.equal(await part.getByRole('button', { name: 'Copy viewer link' }).count(), 0);
  const bobToken = await part.evaluate((sid) => sessionStorage.getItem('convene.token.' + sid), s.id);
  assert.equal(await refused(node, 'POST', `/sessions/${s.id}/hls`, {}, bobToken), 403, "a participant's start");
  assert.equal(await refused(node, 'POST', `/sessions/${s.id}/tokens`, { role: 'listener' }, bobToken), 403, "a participant's viewer token");
  const adaToken = await chair.evaluate((sid) => sessionStorage.getItem('convene.token.' + sid), s.id);
  assert.equal(await refused(node, 'POST', `/sessions/${s.id}/tokens`, { role: 'participant' }, adaToken), 403, "a chair's participant token");

  // The chair starts the broadcast; everyone sees Live.
  const panel = chair.getByRole('region', { name: 'Broadcast' });
  // By keyboard: the video to show, then Tab to Start broadcast, Enter.
  await panel.getByLabel('Show').selectOption('speaker');
  await panel.getByLabel('Show').focus();
  await chair.keyboard.press('Tab');
  assert.equal(await chair.evaluate(() => document.activeElement?.textContent?.trim()), 'Start broadcast');
  await chair.keyboard.press('Enter');
  await panel.getByRole('button', { name: 'Stop broadcast' }).waitFor({ timeout: 15_000 });
  assert.match(await panel.getByTestId('broadcast-state').textContent(), /Live/);
  await part.getByTestId('live-badge').waitFor({ timeout: 15_000 });
  assert.match(await part.getByTestId('live-badge').textContent(), /Live/);

  // The chair copies the viewer link; a viewer plays it.
  await panel.getByRole('button', { name: 'Copy viewer link' }).click();
  const link = await panel.getByTestId('viewer-link').inputValue();
  assert.match(link, new RegExp(`^${node.url}/watch/${s.id}#t=cv1\\.`));
  await cannotJoin(node, s.id, link);
  const viewer = await (await browser.newContext()).newPage();
  await viewer.goto(link);
  const { st, later } = await watchPlays(viewer, node, s.id, 90_000);
  assert.ok(later.frames > st.frames, 'frames go on being decoded; node log: ' + node.log().slice(-3000));
  await viewer.getByTestId('watch-live').waitFor({ timeout: 5_000 });

  // The chair stops: Live goes, the viewer is told the broadcast ended.
  await panel.getByRole('button', { name: 'Stop broadcast' }).click();
  await panel.getByRole('button', { name: 'Start broadcast' }).waitFor({ timeout: 15_000 });
  await part.getByTestId('live-badge').waitFor({ state: 'detached', timeout: 15_000 });
  await waitFor(async () => /broadcast has ended/.test((await viewer.getByTestId('watch-state').allTextContents()).join(' ')), 60_000,
    'the viewer page to say the broadcast ended');
  assert.equal(await viewer.getByTestId('watch-live').count(), 0);
});

test('a node without ffmpeg: the chair reads why it cannot broadcast', { timeout: 60_000 }, async () => {
  const bare = await startNode(['-streaming-ffmpeg', '/nonexistent/ffmpeg']);
  try {
    const s = await bare.api('POST', '/sessions', { name: 'no ffmpeg' });
    const chair = await joinThroughUI(await browser.newContext(), await joinLink(bare, s.id, 'chair'), 'Ada');
    const panel = chair.getByRole('region', { name: 'Broadcast' });
    await panel.getByRole('button', { name: 'Start broadcast' }).click();
    const alert = panel.getByRole('alert');
    await alert.waitFor({ timeout: 15_000 });
    assert.match(await alert.textContent(), /cannot broadcast: ffmpeg is not installed/);
    assert.equal(await panel.getByRole('button', { name: 'Stop broadcast' }).count(), 0);
  } finally {
    bare.stop();
  }
});
