// Recording a session where ffmpeg (plain RTP) and two Chromium pages
// (WebRTC) meet (issue 15): the files hold exactly what the node received.
// ffmpeg's datagrams go through a tee that keeps a copy, so its streams are
// compared byte for byte; the pages' streams, decrypted by the node, are
// compared with what each page says it sent and what the node's receiver
// reports told it was lost. The files are read with a reader of rtptools'
// rtpdump format written here from its description, not the node's own.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { joinThroughUI, launch, startNode, waitFor } from './harness.mjs';

let node, browser;
before(async () => {
  node = await startNode(['-recording-capacity-mbps', '1000']);
  browser = await launch();
});
after(async () => {
  await browser?.close();
  node?.stop();
});

// readRtpdump parses rtptools' rtpdump: "#!rtpplay1.0 address/port\n", a
// 16-byte header (start seconds and microseconds, source, port, padding),
// then records of u16 length (with this 8-byte header), u16 plen (the RTP
// packet's length; 0 for RTCP), u32 offset in ms, and the packet; all
// big-endian.
function readRtpdump(path) {
  const b = readFileSync(path);
  const nl = b.indexOf(0x0a);
  assert.match(b.subarray(0, nl).toString('latin1'), /^#!rtpplay1\.0 [\d.]+\/\d+$/, path);
  let o = nl + 1 + 16;
  const rtp = [], rtcp = [];
  while (o < b.length) {
    assert.ok(o + 8 <= b.length, `${path}: a torn record header at ${o}`);
    const len = b.readUInt16BE(o), plen = b.readUInt16BE(o + 2);
    assert.ok(len >= 8 && o + len <= b.length, `${path}: a record of ${len} bytes at ${o}`);
    const data = Buffer.from(b.subarray(o + 8, o + len));
    if (plen === 0) rtcp.push(data);
    else {
      assert.equal(plen, data.length, `${path}: plen ${plen} of a ${data.length}-byte packet`);
      rtp.push(data);
    }
    o += len;
  }
  return { rtp, rtcp };
}

// bindPair binds two UDP sockets on consecutive ports (RTP, RTCP).
async function bindPair() {
  for (;;) {
    const a = dgram.createSocket('udp4');
    await new Promise((r) => a.bind(0, '127.0.0.1', r));
    const port = a.address().port;
    if (port % 2 === 1 || port > 65000) { a.close(); continue; }
    const b = dgram.createSocket('udp4');
    const ok = await new Promise((r) => { b.once('error', () => r(false)); b.bind(port + 1, '127.0.0.1', () => r(true)); });
    if (ok) return [a, b];
    a.close();
  }
}

// tee takes ffmpeg's RTP and RTCP on one pair, keeps a copy and sends each
// on from another pair (the link's remote) to the node's link.
async function tee() {
  const [inRtp, inRtcp] = await bindPair();
  const [outRtp, outRtcp] = await bindPair();
  const t = { rtp: [], rtcp: [], last: Date.now(), port: inRtp.address().port, remote: `127.0.0.1:${outRtp.address().port}` };
  t.to = (link) => {
    inRtp.on('message', (m) => { t.rtp.push(m); t.last = Date.now(); outRtp.send(m, link.local.rtp_port, '127.0.0.1'); });
    inRtcp.on('message', (m) => { t.rtcp.push(m); t.last = Date.now(); outRtcp.send(m, link.local.rtcp_port, '127.0.0.1'); });
  };
  t.close = () => [inRtp, inRtcp, outRtp, outRtcp].forEach((s) => s.close());
  return t;
}

const same = (a, b) => a.length === b.length && a.every((x, i) => x.equals(b[i]));

async function link(sid, role) {
  const t = await node.api('POST', `/sessions/${sid}/tokens`, { role });
  return `${node.url}/join/${sid}#t=${encodeURIComponent(t.token)}`;
}

const sentBy = async (page) => Object.fromEntries((await page.evaluate(() => window.convene.sent())).map((s) => [s.ssrc, s]));

test('ffmpeg and two browsers in a recorded session: the files hold what the node received', { timeout: 150_000 }, async (tt) => {
  const s = await node.api('POST', '/sessions', { name: 'mixed recording' });
  const ctx = await browser.newContext();
  const ada = await joinThroughUI(ctx, await link(s.id, 'chair'), 'Ada');
  const bob = await joinThroughUI(ctx, await link(s.id, 'participant'), 'Bob');
  const members = { ada: await ada.evaluate(() => window.convene.member), bob: await bob.evaluate(() => window.convene.member) };
  await waitFor(async () => {
    const [a, b] = [await sentBy(ada), await sentBy(bob)];
    const on = (x) => Object.values(x).filter((v) => v.packetsSent > 0).map((v) => v.kind);
    return on(a).includes('audio') && on(a).includes('video') && on(b).includes('audio') && on(b).includes('video');
  }, 30_000, 'both pages sending audio and video');

  const audioTee = await tee(), videoTee = await tee();
  const al = await node.api('POST', `/sessions/${s.id}/rtp-links`, { remote: audioTee.remote, kind: 'audio', direction: 'sendonly' });
  const vl = await node.api('POST', `/sessions/${s.id}/rtp-links`, { remote: videoTee.remote, kind: 'video', direction: 'sendonly' });
  audioTee.to(al);
  videoTee.to(vl);

  const before = { ada: await sentBy(ada), bob: await sentBy(bob) };
  const rec = await node.api('POST', `/sessions/${s.id}/recordings`, { title: 'mixed' });
  const ff = spawn('ffmpeg', ['-hide_banner', '-loglevel', 'error', '-re',
    '-f', 'lavfi', '-i', 'sine=frequency=440:duration=4', '-f', 'lavfi', '-i', 'testsrc=size=320x240:rate=15:duration=4',
    '-map', '0:a', '-ar', '8000', '-ac', '1', '-c:a', 'pcm_mulaw', '-f', 'rtp', `rtp://127.0.0.1:${audioTee.port}`,
    '-map', '1:v', '-c:v', 'libvpx', '-deadline', 'realtime', '-b:v', '300k', '-f', 'rtp', `rtp://127.0.0.1:${videoTee.port}`],
    { stdio: 'ignore' });
  const code = await new Promise((r) => ff.on('exit', r));
  assert.equal(code, 0, 'ffmpeg exits cleanly');
  await waitFor(() => Date.now() - Math.max(audioTee.last, videoTee.last) > 1000, 10_000, 'the tees to fall quiet');
  const stopped = await node.api('POST', `/recordings/${rec.id}/stop`, {});
  assert.equal(stopped.state, 'finished');
  const afterStop = { ada: await sentBy(ada), bob: await sentBy(bob) };
  audioTee.close();
  videoTee.close();
  await ctx.close();

  const got = await node.api('GET', `/recordings/${rec.id}`);
  assert.deepEqual(got.dropped ?? {}, {}, 'the recorder dropped nothing');
  const dir = join(node.dir, 'recordings', rec.id);
  const files = got.files.map((f) => ({ ...f, ...readRtpdump(join(dir, f.file)) }));
  for (const f of files) assert.equal(f.rtp.length, f.packets, `${f.file}: the sidecar counts ${f.packets} packets, the file holds ${f.rtp.length}`);

  // ffmpeg's streams: every datagram the node was sent, in order, RTCP included.
  for (const [kind, t, l] of [['audio', audioTee, al], ['video', videoTee, vl]]) {
    const mine = files.filter((f) => f.member === l.id || f.track === l.id || (f.rtcp_only && f.kind === kind && t.rtcp.some((p) => p.readUInt32BE(4) === f.ssrc)));
    const rtp = mine.flatMap((f) => f.rtp), rtcp = mine.flatMap((f) => f.rtcp);
    assert.ok(t.rtp.length > 40, `ffmpeg sent ${t.rtp.length} ${kind} packets`);
    assert.ok(same(rtp, t.rtp), `${kind}: ${rtp.length} RTP packets recorded, ${t.rtp.length} sent; not the same bytes in the same order`);
    assert.ok(same(rtcp, t.rtcp), `${kind}: ${rtcp.length} RTCP packets recorded, ${t.rtcp.length} sent`);
  }

  // The pages' streams: each SSRC a page sent on during the recording has a
  // file of that member, in the codec the page used; a file holds no more
  // packets than the page sent in the window, and its sequence numbers skip
  // no more than the node's reports said were lost.
  const checked = [];
  for (const who of ['ada', 'bob']) {
    for (const [ssrc, end] of Object.entries(afterStop[who])) {
      const sent = end.packetsSent - (before[who][ssrc]?.packetsSent ?? 0);
      if (sent < 50) continue; // a simulcast layer the page kept off
      const f = files.find((x) => x.ssrc === Number(ssrc) && !x.rtcp_only);
      assert.ok(f, `${who}'s ${end.kind} SSRC ${ssrc} (${sent} packets in the window) has no file`);
      assert.equal(f.member, members[who], `${f.file}: member`);
      assert.equal(f.kind, end.kind);
      assert.ok(f.payload_types.some((pt) => pt.codec?.toLowerCase() === end.mime.toLowerCase()), `${f.file}: ${JSON.stringify(f.payload_types)}, the page sent ${end.mime}`);
      assert.ok(f.rtp.length > 20 && f.rtp.length <= sent, `${f.file}: ${f.rtp.length} packets recorded, ${sent} sent in the window`);
      let gaps = 0;
      for (let i = 1; i < f.rtp.length; i++) {
        const d = (f.rtp[i].readUInt16BE(2) - f.rtp[i - 1].readUInt16BE(2) + 65536) % 65536;
        assert.ok(d >= 1 && d < 1000, `${f.file}: sequence ${f.rtp[i - 1].readUInt16BE(2)} then ${f.rtp[i].readUInt16BE(2)}`);
        gaps += d - 1;
        assert.equal(f.rtp[i].readUInt32BE(8), f.ssrc, `${f.file}: a packet of another SSRC`);
      }
      assert.ok(gaps <= end.lost, `${f.file}: ${gaps} packets missing, the node reported ${end.lost} lost`);
      checked.push(`${who} ${end.kind} ${f.rtp.length}/${sent}`);
    }
  }
  assert.ok(checked.length >= 4, `browser streams checked: ${checked}`);
  tt.diagnostic(`ffmpeg: ${audioTee.rtp.length} audio, ${videoTee.rtp.length} video packets byte for byte; pages (recorded/sent in the window): ${checked.join(', ')}`);
});
