// The e2e harness: starts a node (bin/convene) on loopback with a fresh
// data dir and a known API key, launches Debian's Chromium with fake media
// devices, and stops both by PID at the end.
import { spawn } from 'node:child_process';
import { mkdtempSync, mkdirSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { createSocket } from 'node:dgram';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const here = dirname(fileURLToPath(import.meta.url));
export const artifacts = join(here, 'artifacts');
mkdirSync(artifacts, { recursive: true });

export function freePort(kind = 'tcp') {
  return new Promise((resolve, reject) => {
    if (kind === 'udp') {
      const s = createSocket('udp4');
      s.bind(0, '127.0.0.1', () => {
        const p = s.address().port;
        s.close(() => resolve(p));
      });
      s.on('error', reject);
      return;
    }
    const srv = createServer();
    srv.listen(0, '127.0.0.1', () => {
      const p = srv.address().port;
      srv.close(() => resolve(p));
    });
    srv.on('error', reject);
  });
}

// startNode starts a node; extra are more `convene serve` flags.
export async function startNode(extra = []) {
  const bin = process.env.CONVENE_BIN ?? join(here, '..', '..', 'bin', 'convene');
  const dir = mkdtempSync(join(tmpdir(), 'convene-e2e-'));
  const port = await freePort();
  const key = 'e2e-' + Math.random().toString(36).slice(2);
  const args = ['serve', '-data-dir', dir, '-http-addr', `127.0.0.1:${port}`, '-rtp-port', '0', '-sip-listen', '127.0.0.1:0',
    '-webrtc-udp-port', String(await freePort('udp')), '-auth-api-keys', key, '-log-level', 'warn', ...extra];
  const proc = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  proc.stdout.on('data', (d) => (log += d));
  proc.stderr.on('data', (d) => (log += d));
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 100; i++) {
    try {
      const r = await fetch(url + '/healthz');
      if (r.ok) break;
    } catch {}
    await new Promise((r) => setTimeout(r, 100));
  }
  const api = async (method, path, body, token) => {
    const headers = { 'Content-Type': 'application/json' };
    if (token) headers.Authorization = 'Bearer ' + token;
    else headers['X-API-Key'] = key;
    const r = await fetch(url + '/api/v1' + path, { method, headers, body: body ? JSON.stringify(body) : undefined });
    const t = await r.text();
    if (!r.ok) throw new Error(`${method} ${path}: ${r.status} ${t}`);
    return t ? JSON.parse(t) : {};
  };
  return {
    url, key, api, proc, dir,
    log: () => log,
    stop: () => {
      proc.kill('SIGTERM');
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

// metric reads one sample of node's /metrics (0 when absent).
export async function metric(node, sample) {
  const r = await fetch(node.url + '/metrics', { headers: { 'X-API-Key': node.key } });
  const line = (await r.text()).split('\n').find((l) => l.startsWith(sample + ' '));
  return line ? Number(line.slice(sample.length + 1)) : 0;
}

// launch starts Chromium with fake media devices; extra are more flags
// (--use-file-for-fake-audio-capture=tone.wav for a known microphone).
export async function launch(extra = []) {
  return chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    args: ['--use-fake-device-for-media-stream', '--use-fake-ui-for-media-stream', '--no-sandbox',
      '--autoplay-policy=no-user-gesture-required', '--allow-loopback-in-peer-connection', ...extra],
  });
}

// waitFor polls f until it returns a truthy value or ms pass.
export async function waitFor(f, ms, what) {
  const end = Date.now() + ms;
  let last;
  while (Date.now() < end) {
    last = await f();
    if (last) return last;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`timed out after ${ms} ms waiting for ${what}: ${JSON.stringify(last)}`);
}

// joinThroughUI opens a join link and joins as name; it returns the page
// once the meeting shows.
export async function joinThroughUI(context, link, name) {
  const page = await context.newPage();
  await page.goto(link);
  await page.getByLabel('Your name').fill(name);
  await page.getByRole('button', { name: 'Join' }).click();
  await page.getByRole('navigation', { name: 'Call controls' }).waitFor({ timeout: 15000 });
  await page.waitForFunction(() => window.convene && window.convene.member, null, { timeout: 15000 });
  return page;
}

// remoteStats returns what the page decoded of each remote member.
export const remoteStats = (page) => page.evaluate(() => window.convene.stats());

// sendPort is an even port for ffmpeg to send from (RTCP from the next).
const sendPort = () => 20000 + 2 * Math.floor(Math.random() * 4000);

// feedTestCard has ffmpeg send a tone (PCMU) and a test card (VP8,
// 320×240, 15 fps) into session sid of node over plain RTP, for secs
// seconds; it returns the child, for the caller to kill.
export async function feedTestCard(node, sid, secs = 90) {
  const [ap, vp] = [sendPort(), sendPort()];
  const a = await node.api('POST', `/sessions/${sid}/rtp-links`, { remote: `127.0.0.1:${ap}`, kind: 'audio', direction: 'sendonly' });
  const v = await node.api('POST', `/sessions/${sid}/rtp-links`, { remote: `127.0.0.1:${vp}`, kind: 'video', direction: 'sendonly' });
  const to = (l, p) => `rtp://${l.local.addr}:${l.local.rtp_port}?localrtpport=${p}&localrtcpport=${p + 1}`;
  return spawn('ffmpeg', ['-hide_banner', '-loglevel', 'error', '-nostdin', '-re',
    '-f', 'lavfi', '-i', `sine=frequency=440:duration=${secs}`, '-f', 'lavfi', '-i', `testsrc=size=320x240:rate=15:duration=${secs}`,
    '-map', '0:a', '-ar', '8000', '-ac', '1', '-c:a', 'pcm_mulaw', '-f', 'rtp', to(a, ap),
    '-map', '1:v', '-c:v', 'libvpx', '-deadline', 'realtime', '-b:v', '300k', '-g', '15', '-f', 'rtp', to(v, vp)], { stdio: 'ignore' });
}

// watchPlays waits for a viewer page (/watch/…) to play 3 s of a session's
// HLS stream, then for its time to go on 2 s more; it returns the video's
// state at both points ({t, frames, w}). The error it throws on a time-out
// says what the page and the node said (node.dir's HLS files included).
export async function watchPlays(page, node, sid, ms = 60_000) {
  const said = [];
  page.on('console', (m) => said.push(m.text()));
  const video = page.getByTestId('hls-video');
  const state = () =>
    video.evaluate((el) => ({ t: el.currentTime, frames: el.getVideoPlaybackQuality().totalVideoFrames, w: el.videoWidth, err: el.error?.message ?? '' }));
  const st = await waitFor(async () => {
    const x = await state();
    return x.t > 3 && x.frames > 30 ? x : null;
  }, ms, 'the viewer to play 3 s of the stream').catch(async (e) => {
    const { readdirSync } = await import('node:fs');
    let files = '';
    try {
      files = readdirSync(node.dir + '/hls/' + sid).join(' ');
    } catch {}
    const shown = await page.locator('[role=alert], [role=status]').allTextContents();
    throw new Error(`${e.message}; state ${JSON.stringify(await state())}; page says ${shown}; console ${said.slice(-10).join(' | ')}; files ${files}; log ${node.log().slice(-2000)}`);
  });
  const later = await waitFor(async () => {
    const x = await state();
    return x.t > st.t + 2 ? x : null;
  }, 30_000, 'the time to go on');
  console.log(`viewer: ${st.t.toFixed(1)} s played, ${st.frames} frames; then ${later.t.toFixed(1)} s, ${later.frames} frames`);
  return { st, later };
}
