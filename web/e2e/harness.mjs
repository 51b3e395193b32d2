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
