// Join time in Chromium: from the signalling WebSocket opening to the first
// remote video frame decoded, over repeated joins of one session with a
// publisher in it, on loopback. Writes <out>/<date>-jointime.md.
//
//   node bench/jointime.mjs [out dir] [joins]
import { writeFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { joinThroughUI, launch, startNode, waitFor } from '../e2e/harness.mjs';

const stamp = () => {
  const iso = new Date().toISOString();
  return iso.slice(0, 10) + '-' + iso.slice(11, 19).replace(/:/g, '');
};
const out = process.argv[2] ?? '../bench/results';
const joins = Number(process.argv[3] ?? 15);
const node = await startNode();
const browser = await launch();
try {
  const s = await node.api('POST', '/sessions', { name: 'jointime' });
  const link = async () => `${node.url}/join/${s.id}#t=${encodeURIComponent((await node.api('POST', `/sessions/${s.id}/tokens`, { role: 'participant' })).token)}`;
  const pubCtx = await browser.newContext();
  const pubPage = await joinThroughUI(pubCtx, await link(), 'Publisher');
  const times = [];
  const phases = []; // each join's timing, for where the time goes
  for (let i = 0; i < joins; i++) {
    const ctx = await browser.newContext();
    const page = await joinThroughUI(ctx, await link(), 'Joiner ' + i);
    const t = await waitFor(async () => {
      const x = await page.evaluate(() => window.convene.timing());
      return x.firstFrame && x.wsOpen ? x : null;
    }, 30_000, 'the first remote frame');
    times.push(t.firstFrame - t.wsOpen);
    phases.push(t);
    await ctx.close();
  }
  times.sort((a, b) => a - b);
  const pct = (p) => times[Math.min(times.length - 1, Math.floor(p * times.length))];
  const chromium = browser.version();
  const cores = await pubPage.evaluate(() => navigator.hardwareConcurrency);
  let md = `# Join time in Chromium, ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC\n\n` +
    `Chromium ${chromium} with fake devices joins a session that has one publisher (camera and microphone), ${joins} times, on loopback. ` +
    `Measured in the page: the signalling WebSocket opening → the first remote video frame decoded (a video element playing the remote track has its first frame; the first packet is the track unmuting). ` +
    `The pages' cameras are ${cores <= 2 ? '640×360, in two simulcast layers' : '1280×720, in three simulcast layers'}: the web app asks 640×360 of a machine of two cores or fewer and this one has ${cores}.\n\n` +
    `| joins | p50 ms | p95 ms | min ms | max ms | target p50 |\n|---:|---:|---:|---:|---:|---:|\n` +
    `| ${joins} | ${pct(0.5).toFixed(0)} | ${pct(0.95).toFixed(0)} | ${times[0].toFixed(0)} | ${times[times.length - 1].toFixed(0)} | < 500 |\n`;
  // Where the time goes: the median time of each step after the socket
  // opened, and of each step after the one before.
  const steps = [['welcome', 'the welcome frame'], ['offer', 'the subscriber offer'], ['answered', 'the answer sent'],
    ['connected', 'the subscriber connection connected (ICE, DTLS)'], ['firstPacket', 'the first video packet'], ['firstFrame', 'the first frame decoded']];
  const med = (v) => (v.sort((a, b) => a - b), v[Math.floor(v.length / 2)]);
  let rows = '';
  let prev = 'wsOpen';
  for (const [k, what] of steps) {
    const since = phases.filter((x) => x[k] != null).map((x) => x[k] - x.wsOpen);
    const step = phases.filter((x) => x[k] != null && x[prev] != null).map((x) => x[k] - x[prev]);
    rows += `| ${what} | ${since.length ? med(since).toFixed(0) : '–'} | ${step.length ? med(step).toFixed(0) : '–'} |\n`;
    prev = k;
  }
  md += `\nWhere the time goes (medians, ms):\n\n| step | since the socket opened | since the step before |\n|---|---:|---:|\n` + rows;
  mkdirSync(out, { recursive: true });
  const file = join(out, stamp() + '-jointime.md');
  writeFileSync(file, md);
  process.stdout.write(md + `\nreport: ${file}\n`);
} finally {
  await browser.close();
  node.stop();
}
