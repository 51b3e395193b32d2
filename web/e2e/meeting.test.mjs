// The web app in Debian's Chromium against a real node: the pages people
// use, clicked through as they would.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { artifacts, joinThroughUI, launch, metric, remoteStats, startNode, waitFor } from './harness.mjs';

let node, browser;
before(async () => {
  node = await startNode();
  browser = await launch();
});
after(async () => {
  await browser?.close();
  node?.stop();
});

async function session(name) {
  return node.api('POST', '/sessions', { name });
}
async function link(sid, role = 'participant') {
  const t = await node.api('POST', `/sessions/${sid}/tokens`, { role });
  return `${node.url}/join/${sid}#t=${encodeURIComponent(t.token)}`;
}
// tabThrough presses Tab n times and returns the accessible name of each
// control that took the focus; every one must have a name.
async function tabThrough(page, n) {
  const names = [];
  for (let i = 0; i < n; i++) {
    await page.keyboard.press('Tab');
    names.push(await page.evaluate(() => {
      const el = document.activeElement;
      if (!el || el === document.body) return null;
      const name = el.getAttribute('aria-label') || el.labels?.[0]?.textContent || el.textContent;
      return { tag: el.tagName, name: (name || '').trim() };
    }));
  }
  for (const f of names.filter(Boolean)) assert.ok(f.name, `a focusable ${f.tag} without an accessible name`);
  return names.filter(Boolean);
}

const decodedFrom = (stats, member) => stats[member] && stats[member].framesDecoded > 0 && stats[member].audioEnergy > 0;

test('home: the operator creates a session and shares a join link', { timeout: 60_000 }, async () => {
  const ctx = await browser.newContext();
  const page = await ctx.newPage();
  await page.goto(node.url + '/');
  await page.getByLabel('API key').fill(node.key);
  await page.getByRole('button', { name: 'Continue' }).click();
  await page.getByLabel('Name').fill('Weekly review');
  await page.getByRole('button', { name: 'Create session' }).click();
  const item = page.getByTestId('session-Weekly review');
  await item.waitFor();
  assert.match(await item.textContent(), /activated/);
  await item.getByRole('button', { name: 'Share join link' }).click();
  const value = await page.getByTestId('join-link').inputValue();
  assert.match(value, /\/join\/s_[0-9a-f]+#t=/);
  await page.goto(node.url + '/');
  const reached = await tabThrough(page, 24);
  assert.ok(reached.some((f) => f.name === 'Create session'), 'Tab reaches Create session: ' + JSON.stringify(reached));
  await ctx.close();
});

test('two pages meet: each decodes the other, and a mute shows', { timeout: 90_000 }, async () => {
  const s = await session('pair');
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const a = await joinThroughUI(ctx, await link(s.id), 'Ada');
  const b = await joinThroughUI(ctx, await link(s.id), 'Bob');
  const am = await a.evaluate(() => window.convene.member);
  const bm = await b.evaluate(() => window.convene.member);
  await waitFor(async () => decodedFrom(await remoteStats(a), bm), 30_000, 'Ada decoding Bob');
  await waitFor(async () => decodedFrom(await remoteStats(b), am), 30_000, 'Bob decoding Ada');
  // Chromium answers as the DTLS client, so the node knows its SRTP keys
  // and sends the audio and video it decoded the direct way (the node's
  // own SRTP).
  for (const kind of ['audio', 'video']) {
    assert.ok((await metric(node, `convene_webrtc_direct_packets_total{kind="${kind}"}`)) > 0, `${kind} sent the direct way`);
  }
  // The node answers Chromium's publishing offer as the DTLS server
  // (setup:passive), so it reads the microphone's and the camera's
  // packets the direct way too (with its own transport-wide feedback and
  // NACKs), and each page decodes the other's (above).
  for (const kind of ['audio', 'video']) {
    assert.ok((await metric(node, `convene_webrtc_direct_in_packets_total{kind="${kind}"}`)) > 0, `${kind} received the direct way`);
  }
  if (process.env.SCREENSHOT) {
    await b.getByText('· good').first().waitFor({ timeout: 10_000 });
    await b.screenshot({ path: process.env.SCREENSHOT });
  }
  await a.getByRole('button', { name: 'Mute microphone' }).click();
  await b.getByTestId('tile-' + am).getByTestId('muted').waitFor({ timeout: 10_000 });
  await a.getByRole('button', { name: 'Unmute microphone' }).waitFor();
  // Keyboard: every control the Tab key reaches has a name, and Enter
  // works the focused one.
  const reached = await tabThrough(b, 12);
  assert.ok(reached.some((f) => f.name.includes('Mute microphone')), 'Tab reaches the mute button: ' + JSON.stringify(reached));
  await b.getByRole('button', { name: 'Mute microphone' }).focus();
  await b.keyboard.press('Enter');
  await b.getByRole('button', { name: 'Unmute microphone' }).waitFor();
  await b.screenshot({ path: join(artifacts, 'session.png') });
  await ctx.close();
});

test('events: a page that lost its event stream catches up on reconnect', { timeout: 60_000 }, async () => {
  const s = await session('resume');
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const a = await joinThroughUI(ctx, await link(s.id), 'Ada');
  await a.evaluate(() => window.convene.pauseEvents());
  await a.getByText('Reconnecting to the event stream').waitFor({ timeout: 5_000 });
  // While Ada's stream is down: the floor style changes and Bob joins.
  await node.api('PUT', `/sessions/${s.id}/floors/audio`, { style: 'floor_control', auto: false });
  const b = await joinThroughUI(ctx, await link(s.id), 'Bob');
  await b.getByTestId('member-Bob').waitFor();
  await a.evaluate(() => window.convene.resumeEvents());
  await a.getByRole('button', { name: 'Request audio floor' }).waitFor({ timeout: 10_000 });
  await a.getByTestId('member-Bob').waitFor({ timeout: 10_000 });
  await ctx.close();
});

test('floor: audio is heard only after the chair grants the request', { timeout: 90_000 }, async () => {
  const s = await session('floor');
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const chair = await joinThroughUI(ctx, await link(s.id, 'chair'), 'Chair');
  await chair.getByLabel('Style of the audio floor').selectOption('floor_control');
  const p = await joinThroughUI(ctx, await link(s.id), 'Pat');
  const pm = await p.evaluate(() => window.convene.member);
  await waitFor(async () => ((await remoteStats(chair))[pm] || {}).framesDecoded > 0, 30_000, "the chair seeing Pat's video");
  await new Promise((r) => setTimeout(r, 1500));
  assert.equal(((await remoteStats(chair))[pm] || {}).audioEnergy || 0, 0, "Pat's audio reached the chair before the grant");
  await p.getByRole('button', { name: 'Request audio floor' }).click();
  await p.getByTestId('queue-position').waitFor({ timeout: 10_000 });
  await chair.getByRole('button', { name: 'Grant the audio floor to Pat' }).click();
  await p.getByText('You have the audio floor.').waitFor({ timeout: 10_000 });
  await waitFor(async () => ((await remoteStats(chair))[pm] || {}).audioEnergy > 0, 20_000, "the chair hearing Pat after the grant");
  await ctx.close();
});

test('the chair calls a phone in: an account without a phone is refused clearly', { timeout: 60_000 }, async () => {
  const s = await session('call out');
  await node.api('POST', '/users', { username: 'nobody', password: 'long-enough-pass-123' });
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const chair = await joinThroughUI(ctx, await link(s.id, 'chair'), 'Chair');
  const call = chair.getByRole('button', { name: 'Call', exact: true });
  assert.equal(await call.isDisabled(), true, 'Call is enabled with no account typed');
  await chair.getByLabel('Call a phone in (SIP account)').fill('nobody');
  await chair.keyboard.press('Enter');
  await chair.getByText(/Could not call nobody: .*no registered phone/).waitFor({ timeout: 10_000 });
  const p = await joinThroughUI(ctx, await link(s.id), 'Pat');
  assert.equal(await p.getByLabel('Call a phone in (SIP account)').count(), 0, 'a participant is offered the call form');
  await ctx.close();
});

test('a phone: the mobile layout joins and is usable by touch', { timeout: 90_000 }, async () => {
  const s = await session('mobile');
  const desk = await browser.newContext();
  const other = await joinThroughUI(desk, await link(s.id), 'Desk');
  const phone = await browser.newContext({ viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true, deviceScaleFactor: 2 });
  const page = await joinThroughUI(phone, await link(s.id), 'Phone');
  const om = await other.evaluate(() => window.convene.member);
  await waitFor(async () => decodedFrom(await remoteStats(page), om), 30_000, 'the phone decoding the desk');
  const mute = page.getByRole('button', { name: 'Mute microphone' });
  const box = await mute.boundingBox();
  assert.ok(box && box.height >= 40 && box.x >= 0 && box.x + box.width <= 390, `the mute button fits a thumb and the screen: ${JSON.stringify(box)}`);
  await mute.tap();
  await page.getByRole('button', { name: 'Unmute microphone' }).waitFor();
  const width = await page.evaluate(() => document.documentElement.scrollWidth);
  assert.ok(width <= 390, `no sideways scrolling on a phone (page is ${width}px wide)`);
  await page.screenshot({ path: join(artifacts, 'mobile.png'), fullPage: true });
  await phone.close();
  await desk.close();
});

test('ffmpeg over plain RTP and a WHIP publisher reach a page', { timeout: 90_000 }, async () => {
  const s = await session('ingest');
  const ctx = await browser.newContext();
  const viewer = await joinThroughUI(ctx, await link(s.id, 'listener'), 'Viewer');
  // ffmpeg: PCMU audio and VP8 video to two plain RTP links (Debian's
  // ffmpeg 5.1 has no WHIP muxer; WHIP comes from a page's own client below).
  const audio = await node.api('POST', `/sessions/${s.id}/rtp-links`, { remote: '127.0.0.1:47770', kind: 'audio', direction: 'sendonly' });
  const video = await node.api('POST', `/sessions/${s.id}/rtp-links`, { remote: '127.0.0.1:47772', kind: 'video', direction: 'sendonly' });
  const ff = spawn('ffmpeg', ['-hide_banner', '-loglevel', 'error', '-re',
    '-f', 'lavfi', '-i', 'sine=frequency=440:duration=20', '-f', 'lavfi', '-i', 'testsrc=size=320x240:rate=15:duration=20',
    '-map', '0:a', '-ar', '8000', '-ac', '1', '-c:a', 'pcm_mulaw', '-f', 'rtp', `rtp://127.0.0.1:${audio.local.rtp_port}?localrtpport=47770&localrtcpport=47771`,
    '-map', '1:v', '-c:v', 'libvpx', '-deadline', 'realtime', '-b:v', '300k', '-g', '15', '-f', 'rtp', `rtp://127.0.0.1:${video.local.rtp_port}?localrtpport=47772&localrtcpport=47773`],
    { stdio: 'ignore' });
  try {
    await waitFor(async () => {
      const st = await remoteStats(viewer);
      return st[audio.id]?.audioEnergy > 0 && st[video.id]?.framesDecoded > 0 && st;
    }, 30_000, "the page decoding ffmpeg's audio and video");
  } finally {
    ff.kill('SIGTERM');
  }
  // WHIP: a page publishes with the standard WHIP exchange (POST an offer).
  const jt = (await node.api('POST', `/sessions/${s.id}/tokens`, { role: 'participant' })).token;
  const pub = await ctx.newPage();
  await pub.goto(node.url + '/');
  const location = await pub.evaluate(async ({ sid, token }) => {
    const stream = await navigator.mediaDevices.getUserMedia({ audio: true, video: true });
    const pc = new RTCPeerConnection();
    stream.getTracks().forEach((t) => pc.addTransceiver(t, { direction: 'sendonly' }));
    await pc.setLocalDescription(await pc.createOffer());
    await new Promise((r) => (pc.iceGatheringState === 'complete' ? r() : (pc.onicegatheringstatechange = () => pc.iceGatheringState === 'complete' && r())));
    const resp = await fetch(`/api/v1/sessions/${sid}/whip?name=OBS`, { method: 'POST', headers: { 'Content-Type': 'application/sdp', Authorization: 'Bearer ' + token }, body: pc.localDescription.sdp });
    if (resp.status !== 201) throw new Error('WHIP ' + resp.status + ' ' + (await resp.text()));
    await pc.setRemoteDescription({ type: 'answer', sdp: await resp.text() });
    window.whip = pc;
    return resp.headers.get('Location');
  }, { sid: s.id, token: jt });
  assert.match(location, /\/whip\/[0-9a-f]{32}$/);
  const members = await node.api('GET', `/sessions/${s.id}/members`);
  const obs = members.members.find((m) => m.name === 'OBS');
  await waitFor(async () => decodedFrom(await remoteStats(viewer), obs.id), 30_000, 'the page decoding the WHIP publisher');
  await ctx.close();
});
