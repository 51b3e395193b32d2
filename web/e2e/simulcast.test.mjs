// A Chromium camera of 640×360, which the web app sends in two simulcast
// layers (320×180 and 640×360: Chromium sends no more than two of a 360p
// camera, and would drop the top ones of three), reaches the receivers
// that take one layer: a plain RTP link gets its packets as one stream,
// and its thumbnail (at most 320 wide) is made. (A camera whose top layer
// never comes, as three asked of a 360p camera were before, is
// internal/node's TestSimulcastLowLayersLink.)
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createSocket } from 'node:dgram';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { joinThroughUI, launch, startNode, waitFor } from './harness.mjs';

let node, dir, browser, rx;
before(async () => {
  node = await startNode();
  dir = mkdtempSync(join(tmpdir(), 'convene-simulcast-'));
  const file = join(dir, 'camera.y4m');
  execFileSync('ffmpeg', ['-hide_banner', '-loglevel', 'error', '-nostdin', '-f', 'lavfi',
    '-i', 'testsrc=size=640x360:rate=10', '-frames:v', '20', '-pix_fmt', 'yuv420p', '-y', file]);
  browser = await launch([`--use-file-for-fake-video-capture=${file}`]);
  rx = createSocket('udp4');
  await new Promise((r) => rx.bind(0, '127.0.0.1', r));
});
after(async () => {
  await browser?.close();
  rx?.close();
  node?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

// jpegSize reads a baseline JPEG's width and height from its SOF0.
function jpegSize(b) {
  for (let i = 2; i + 9 < b.length;) {
    const m = b[i + 1], len = b.readUInt16BE(i + 2);
    if (m === 0xc0) return { w: b.readUInt16BE(i + 7), h: b.readUInt16BE(i + 5) };
    i += 2 + len;
  }
  return null;
}

test('a 640×360 Chromium camera reaches a plain RTP link and its thumbnail', { timeout: 120_000 }, async (tt) => {
  const s = await node.api('POST', '/sessions', { name: 'simulcast' });
  let packets = 0;
  const ssrcs = new Set();
  rx.on('message', (m) => {
    if (m.length > 12 && (m[1] & 0x7f) >= 96) {
      packets++;
      ssrcs.add(m.readUInt32BE(8));
    }
  });
  await node.api('POST', `/sessions/${s.id}/rtp-links`, { remote: `127.0.0.1:${rx.address().port}`, kind: 'video', direction: 'recvonly' });
  const { token } = await node.api('POST', `/sessions/${s.id}/tokens`, { role: 'participant' });
  const ctx = await browser.newContext({ viewport: { width: 800, height: 600 } });
  const page = await joinThroughUI(ctx, `${node.url}/join/${s.id}#t=${encodeURIComponent(token)}`, 'Ada');
  const member = await page.evaluate(() => window.convene.member);
  const t0 = Date.now();

  await waitFor(() => packets >= 100, 30_000, 'the camera on the plain RTP link').catch((e) => {
    throw new Error(`${e.message}; ${packets} packets; node log: ${node.log().slice(-2000)}`);
  });
  tt.diagnostic(`100 packets on the plain RTP link ${Date.now() - t0} ms after the join`);
  assert.equal(ssrcs.size, 1, 'one stream (one SSRC) on the link, whatever layers it changed between');

  const url = `${node.url}/api/v1/sessions/${s.id}/tracks/${member}/thumbnail.jpg`;
  let last;
  const img = await waitFor(async () => {
    const r = await fetch(url, { headers: { 'X-API-Key': node.key } });
    last = r.status;
    return r.ok && r.headers.get('content-type') === 'image/jpeg' && Buffer.from(await r.arrayBuffer());
  }, 40_000, 'the thumbnail').catch((e) => {
    throw new Error(`${e.message}; last status ${last}; node log: ${node.log().slice(-2000)}`);
  });
  tt.diagnostic(`the thumbnail ${Date.now() - t0} ms after the join`);
  assert.deepEqual([img[0], img[1]], [0xff, 0xd8], 'a JPEG');
  assert.deepEqual(jpegSize(img), { w: 320, h: 180 }, 'a thumbnail 320 wide, of the 16:9 camera');

  const layers = await waitFor(async () => {
    const v = (await page.evaluate(() => window.convene.sent())).filter((x) => x.kind === 'video' && x.width);
    return v.length >= 2 && v;
  }, 10_000, 'two video layers sent');
  assert.deepEqual(layers.map((x) => `${x.rid} ${x.width}×${x.height}`).sort(), ['h 640×360', 'l 320×180'],
    'the page sends the camera in two layers, the top one at full size');
});
