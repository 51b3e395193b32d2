// HLS for passive viewers (issue 18), in Chromium against a real node:
// ffmpeg sends a tone (PCMU) and a test card (VP8) into a session over
// plain RTP, the operator starts the session's HLS, and a viewer page
// opened with a listener's join token plays it with hls.js: its time
// advances and it decodes frames. A page with a bad token says so.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { launch, startNode, waitFor } from './harness.mjs';

let node, browser, ffmpeg;
before(async () => {
  node = await startNode();
  browser = await launch();
});
after(async () => {
  ffmpeg?.kill('SIGKILL');
  await browser?.close();
  node?.stop();
});

// sendPort is an even port for ffmpeg to send from (RTCP from the next).
const sendPort = () => 20000 + 2 * Math.floor(Math.random() * 4000);

test('a viewer plays the session with hls.js', { timeout: 120_000 }, async () => {
  const s = await node.api('POST', '/sessions', { name: 'hls' });
  const [ap, vp] = [sendPort(), sendPort()];
  const a = await node.api('POST', `/sessions/${s.id}/rtp-links`, { remote: `127.0.0.1:${ap}`, kind: 'audio', direction: 'sendonly' });
  const v = await node.api('POST', `/sessions/${s.id}/rtp-links`, { remote: `127.0.0.1:${vp}`, kind: 'video', direction: 'sendonly' });
  const to = (l, p) => `rtp://${l.local.addr}:${l.local.rtp_port}?localrtpport=${p}&localrtcpport=${p + 1}`;
  ffmpeg = spawn('ffmpeg', ['-hide_banner', '-loglevel', 'error', '-nostdin', '-re',
    '-f', 'lavfi', '-i', 'sine=frequency=440:duration=90', '-f', 'lavfi', '-i', 'testsrc=size=320x240:rate=15:duration=90',
    '-map', '0:a', '-ar', '8000', '-ac', '1', '-c:a', 'pcm_mulaw', '-f', 'rtp', to(a, ap),
    '-map', '1:v', '-c:v', 'libvpx', '-deadline', 'realtime', '-b:v', '300k', '-g', '15', '-f', 'rtp', to(v, vp)], { stdio: 'ignore' });
  const started = await node.api('POST', `/sessions/${s.id}/hls`, {});
  assert.equal(started.playlist, `/hls/${s.id}/index.m3u8`);
  const { token } = await node.api('POST', `/sessions/${s.id}/tokens`, { role: 'listener' });

  const page = await (await browser.newContext()).newPage();
  const said = [];
  page.on('console', (m) => said.push(m.text()));
  await page.goto(`${node.url}/watch/${s.id}#t=${encodeURIComponent(token)}`);
  const video = page.getByTestId('hls-video');
  const state = () =>
    video.evaluate((el) => ({ t: el.currentTime, frames: el.getVideoPlaybackQuality().totalVideoFrames, w: el.videoWidth, err: el.error?.message ?? '' }));
  const st = await waitFor(async () => {
    const x = await state();
    return x.t > 3 && x.frames > 30 ? x : null;
  }, 60_000, 'the viewer to play 3 s of the stream').catch(async (e) => {
    const { readdirSync } = await import('node:fs');
    throw new Error(`${e.message}; state ${JSON.stringify(await state())}; alert ${await page.locator('[role=alert]').allTextContents()}; console ${said.slice(-10).join(' | ')}; files ${readdirSync(node.dir + '/hls/' + s.id)}; log ${node.log().slice(-2000)}`);
  });
  assert.equal(st.w, 320, 'the video is the test card, 320 wide');
  const later = await waitFor(async () => {
    const x = await state();
    return x.t > st.t + 2 ? x : null;
  }, 20_000, 'the time to go on');
  assert.ok(later.frames > st.frames, 'frames go on being decoded');
  console.log(`viewer: ${st.t.toFixed(1)} s played, ${st.frames} frames; then ${later.t.toFixed(1)} s, ${later.frames} frames`);

  const bad = await (await browser.newContext()).newPage();
  await bad.goto(`${node.url}/watch/${s.id}#t=cv1.forged`);
  await bad.getByRole('alert').waitFor({ timeout: 30_000 });
  assert.match(await bad.getByRole('alert').textContent(), /not valid/);
});
