// SIP phones and a browser in one session (issue 14): two real phones
// (baresip, a 440 Hz and a 1 kHz tone as their microphones) dial the
// session while a Chromium page is in it with a 1.5 kHz tone as its
// microphone. Each phone hears the other phone and the page and not
// itself; the page receives both phones, transcoded to Opus.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, joinThroughUI, launch, remoteStats, startNode, waitFor } from './harness.mjs';
import { startBaresip, toneShare } from './phone.mjs';

const domain = 'convene.test';
const password = 'long-enough-pass-123';
let node, browser, sipPort, tmp;
const phones = [];
before(async () => {
  tmp = mkdtempSync(join(tmpdir(), 'convene-phones-'));
  // The page's microphone: a loud 1.5 kHz tone (Chromium loops the file;
  // its noise suppression takes a steady tone down by about 15 dB, so the
  // page is quieter in the mix than the phones: a few % of what they hear,
  // where its absence measures 0.00).
  const wav = join(tmp, 'tone1500.wav');
  execFileSync('ffmpeg', ['-hide_banner', '-loglevel', 'error', '-f', 'lavfi', '-i', 'sine=frequency=1500:duration=10', '-af', 'volume=7',
    '-ar', '48000', '-ac', '1', '-c:a', 'pcm_s16le', wav]);
  sipPort = await freePort();
  // baresip 1.0 knows only MD5 digests.
  node = await startNode(['-sip-listen', `127.0.0.1:${sipPort}`, '-sip-algorithms', 'MD5', '-sip-domain', domain,
    '-links-allow-destinations', '127.0.0.0/8']); // the phones are on this host
  browser = await launch([`--use-file-for-fake-audio-capture=${wav}`]);
});
after(async () => {
  for (const p of phones) p.stop();
  await browser?.close();
  node?.stop();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

test('two phones and a page meet: each phone hears the others, the page hears the phones in Opus', { timeout: 120_000 }, async () => {
  for (const username of ['alice', 'bobby']) await node.api('POST', '/users', { username, password });
  const s = await node.api('POST', '/sessions', { name: 'phones' });
  const t = await node.api('POST', `/sessions/${s.id}/tokens`, { role: 'participant' });
  const ctx = await browser.newContext();
  const page = await joinThroughUI(ctx, `${node.url}/join/${s.id}#t=${encodeURIComponent(t.token)}`, 'Web');
  const tones = { alice: 440, bobby: 1000 };
  for (const [user, tone] of Object.entries(tones)) {
    phones.push(startBaresip({ user, password, domain, proxy: `127.0.0.1:${sipPort}`, tone, quitAfter: 14,
      commands: [`/dial sip:${s.id}@127.0.0.1:${sipPort}`] }));
  }
  const members = await waitFor(async () => {
    const m = (await node.api('GET', `/sessions/${s.id}/members`)).members;
    return m.length === 3 && m;
  }, 20_000, 'both phones to join').catch((e) => {
    throw new Error(`${e.message}\n${phones.map((p) => p.output()).join('\n')}\nnode: ${node.log()}`);
  });
  const phoneIDs = members.filter((m) => m.name !== 'Web').map((m) => m.id);
  // The page decodes both phones, and they arrive as Opus (the node
  // transcodes their PCMU once per phone).
  const st = await waitFor(async () => {
    const st = await remoteStats(page);
    return phoneIDs.every((id) => st[id]?.audioEnergy > 0) && st;
  }, 20_000, "the page decoding both phones' audio");
  for (const id of phoneIDs) assert.deepEqual(st[id].codecs, ['audio/opus'], `a phone reaches the page in ${st[id].codecs}`);
  await Promise.all(phones.map((p) => p.done));
  await waitFor(async () => (await node.api('GET', `/sessions/${s.id}/members`)).members.length === 1, 10_000, 'the phones to hang up and leave');
  for (const [i, [user, own]] of Object.entries(tones).entries()) {
    const other = Object.values(tones).find((f) => f !== own);
    const { rate, pcm } = phones[i].decoded();
    assert.ok(pcm.length >= rate * 4, `${user} decoded ${pcm.length} samples at ${rate} Hz:\n${phones[i].output()}`);
    const heard = pcm.subarray(rate * 2); // past the first seconds
    const share = (f) => toneShare(heard, f, rate);
    console.log(`${user} hears: other phone ${share(other).toFixed(2)}, page ${share(1500).toFixed(2)}, itself ${share(own).toFixed(2)}`);
    assert.ok(share(other) >= 0.1, `${user}: the other phone's ${other} Hz holds ${share(other).toFixed(2)} of what it hears`);
    assert.ok(share(1500) >= 0.01, `${user}: the page's 1.5 kHz holds ${share(1500).toFixed(2)} of what it hears`);
    assert.ok(share(own) <= 0.05, `${user}: its own ${own} Hz holds ${share(own).toFixed(2)} of what it hears`);
  }
  await ctx.close();
});
