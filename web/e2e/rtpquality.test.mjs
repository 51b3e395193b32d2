// A phone's link quality in the members list (issue 16, link
// monitoring), in Chromium against a real node: a member "Phone" has a
// plain RTP link whose endpoint (a UDP socket here) sends a receiver
// report saying a quarter of what it hears is lost; the page of a member
// who joined through the web app shows that next to the phone's name.
import { after, before, test } from 'node:test';
import { createSocket } from 'node:dgram';
import { join } from 'node:path';
import { artifacts, joinThroughUI, launch, startNode } from './harness.mjs';

let node, browser, sock;
before(async () => {
  node = await startNode();
  browser = await launch();
});
after(async () => {
  sock?.close();
  await browser?.close();
  node?.stop();
});

// rr is an RTCP receiver report from SSRC 0x88 with one report block
// about SSRC 0x77 (RFC 3550 6.4.2): fraction lost 64/256, 3 lost, jitter
// 96 (12 ms at 8 kHz), no LSR.
function rr() {
  const b = Buffer.alloc(32);
  b.writeUInt8(0x81, 0); // V=2, RC=1
  b.writeUInt8(201, 1); // RR
  b.writeUInt16BE(7, 2); // length in words − 1
  b.writeUInt32BE(0x88, 4);
  b.writeUInt32BE(0x77, 8);
  b.writeUInt32BE((64 << 24) | 3, 12);
  b.writeUInt32BE(1000, 16); // extended highest sequence number
  b.writeUInt32BE(96, 20);
  return b;
}

test('the members list shows what a phone link reports', { timeout: 90_000 }, async () => {
  const s = await node.api('POST', '/sessions', { name: 'rtp quality' });
  const { member: phone } = await node.api('POST', `/sessions/${s.id}/members`, { name: 'Phone', role: 'participant' });
  sock = createSocket('udp4');
  await new Promise((r) => sock.bind(0, '127.0.0.1', r));
  const link = await node.api('POST', `/sessions/${s.id}/rtp-links`, {
    remote: `127.0.0.1:${sock.address().port}`, kind: 'audio', rtcp_mux: true, member: phone.id,
  });
  await new Promise((r, j) => sock.send(rr(), link.local.rtp_port, link.local.addr, (e) => (e ? j(e) : r())));

  const t = await node.api('POST', `/sessions/${s.id}/tokens`, { role: 'participant' });
  const ctx = await browser.newContext();
  const page = await joinThroughUI(ctx, `${node.url}/join/${s.id}#t=${encodeURIComponent(t.token)}`, 'Ada');
  await page.getByTestId('member-Phone').getByText('RTP 25.0% loss, jitter 12 ms').waitFor({ timeout: 30_000 });
  await page.screenshot({ path: join(artifacts, 'rtp-quality.png') });
  await ctx.close();
});
