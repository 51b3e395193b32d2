// A video composite of four Chromium cameras (issue 18). Four browsers,
// each with a camera of its own solid colour (a y4m file ffmpeg makes,
// given to Chromium's fake capture device), join a session through the web
// app; the operator starts a 2×2 composite; the first page decodes the
// composite's track like any remote camera, and a frame of it, drawn into
// a canvas, has each camera's colour in its member's quadrant (join order)
// and each member's name in a box at the cell's bottom left. Killing the
// composite's ffmpeg child: another starts and the page decodes its
// picture on the same track.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { artifacts, joinThroughUI, launch, remoteStats, startNode, waitFor } from './harness.mjs';

// The cameras, in join order. ffmpeg's colour names; rgb as a decoder
// gives them back. The names differ in length, so their boxes do.
const cameras = [
  { colour: 'red', rgb: [255, 0, 0], name: 'Al' },
  { colour: 'lime', rgb: [0, 255, 0], name: 'Bea Marr' },
  { colour: 'blue', rgb: [0, 0, 255], name: 'Cornelius Fitz' },
  { colour: 'yellow', rgb: [255, 255, 0], name: 'Dorothea Wilhelmina' },
];

// A small picture at a low rate: CI has two cores for four browsers. The
// cameras are 640×360, which the web app sends in two simulcast layers,
// 320×180 and 640×360 (the composite shows the 320×180 one).
const W = 320, H = 180, FPS = 5;

let node, dir;
const browsers = [];
before(async () => {
  node = await startNode();
  dir = mkdtempSync(join(tmpdir(), 'convene-composite-'));
  for (const c of cameras) {
    const file = join(dir, c.colour + '.y4m');
    execFileSync('ffmpeg', ['-hide_banner', '-loglevel', 'error', '-nostdin', '-f', 'lavfi',
      '-i', `color=c=${c.colour}:s=640x360:r=${FPS}`, '-frames:v', String(2 * FPS), '-pix_fmt', 'yuv420p', '-y', file]);
    browsers.push(await launch([`--use-file-for-fake-video-capture=${file}`]));
  }
});
after(async () => {
  for (const b of browsers) await b.close();
  node?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

// frameOf draws the composite's video, as the page decodes it, into a
// canvas and returns its size and RGBA pixels (base64).
const frameOf = (page, member) => page.evaluate((m) => {
  const v = document.querySelector(`[data-testid="tile-${m}"] video`);
  if (!v || v.videoWidth === 0 || v.readyState < 2) return null;
  const c = document.createElement('canvas');
  c.width = v.videoWidth;
  c.height = v.videoHeight;
  const g = c.getContext('2d', { willReadFrequently: true });
  g.drawImage(v, 0, 0);
  const d = g.getImageData(0, 0, c.width, c.height).data;
  let s = '';
  for (let i = 0; i < d.length; i += 0x8000) s += String.fromCharCode(...d.subarray(i, i + 0x8000));
  return { w: c.width, h: c.height, rgba: btoa(s), png: c.toDataURL('image/png') };
}, member);

// mean is the mean colour of a rectangle of an RGBA frame.
function mean(f, x0, y0, x1, y1) {
  const s = [0, 0, 0];
  for (let y = y0; y < y1; y++) {
    for (let x = x0; x < x1; x++) {
      for (let k = 0; k < 3; k++) s[k] += f.px[(y * f.w + x) * 4 + k];
    }
  }
  const n = (x1 - x0) * (y1 - y0);
  return s.map((v) => Math.round(v / n));
}

const near = (a, b, tol) => a.every((v, k) => Math.abs(v - b[k]) <= tol);

test('a 2×2 composite of four Chromium cameras: each camera in its quadrant, with its name', { timeout: 180_000 }, async (tt) => {
  const t0 = Date.now();
  const s = await node.api('POST', '/sessions', { name: 'composite' });
  const pages = [];
  for (const [i, c] of cameras.entries()) {
    const { token } = await node.api('POST', `/sessions/${s.id}/tokens`, { role: 'participant' });
    const ctx = await browsers[i].newContext({ viewport: { width: 800, height: 600 } });
    pages.push(await joinThroughUI(ctx, `${node.url}/join/${s.id}#t=${encodeURIComponent(token)}`, c.name));
  }
  tt.diagnostic(`four pages joined ${Date.now() - t0} ms after the start`);
  const comp = await node.api('POST', `/sessions/${s.id}/composites`, { layout: 'grid2', width: W, height: H, fps: FPS });
  await waitFor(async () => {
    const { composites } = await node.api('GET', `/sessions/${s.id}/composites`);
    return (composites[0].showing ?? []).filter(Boolean).length === 4 && composites[0];
  }, 60_000, 'the composite showing four cameras');

  tt.diagnostic(`four cameras shown ${Date.now() - t0} ms after the start`);

  // A frame as the first page decodes it, once it has all four cameras
  // (the child's first frames may come before every camera's keyframe).
  let f;
  const save = () => f && writeFileSync(join(artifacts, 'composite.png'), Buffer.from(f.png.split(',')[1], 'base64'));
  const fourCameras = (what) => waitFor(async () => {
    const got = await frameOf(pages[0], comp.member);
    if (!got) return false;
    f = { ...got, px: Buffer.from(got.rgba, 'base64') };
    return f.w === W && quadrants(f).every((m, i) => near(m, cameras[i].rgb, 60));
  }, 60_000, what).catch(async (e) => {
    save();
    const { composites } = await node.api('GET', `/sessions/${s.id}/composites`);
    const decoded = (await remoteStats(pages[0]))[comp.member];
    const tile = await pages[0].evaluate((m) => {
      const v = document.querySelector(`[data-testid="tile-${m}"] video`);
      return v && { w: v.videoWidth, ready: v.readyState, hidden: v.className };
    }, comp.member);
    throw new Error(`${e.message}; the last frame ${f?.w}×${f?.h}, quadrants ${JSON.stringify(f && quadrants(f))}; ` +
      `the composite ${JSON.stringify(composites)}, the page decoded ${JSON.stringify(decoded)}, its tile ${JSON.stringify(tile)}`);
  });
  await fourCameras('a decoded frame with the four cameras in their quadrants');
  save();
  tt.diagnostic(`a frame with the four cameras ${Date.now() - t0} ms after the start`);
  assert.deepEqual([f.w, f.h], [W, H], 'the composite picture size');
  const q = quadrants(f);
  for (let i = 0; i < 4; i++) {
    for (let j = 0; j < i; j++) assert.ok(!near(q[i], q[j], 100), `quadrants ${j} and ${i} alike: ${q[j]} and ${q[i]}`);
  }

  // Names: a box at each cell's bottom left, as wide as its member's name
  // (they get longer in join order), with the name's light glyphs in it.
  const boxes = q.map((_, i) => nameBox(f, i, cameras[i].rgb));
  tt.diagnostic('name boxes ' + JSON.stringify(boxes));
  for (const [i, b] of boxes.entries()) {
    assert.ok(b.width >= 8 && b.left <= 10, `cell ${i} (${cameras[i].name}): no name box at its bottom left: ${JSON.stringify(b)}`);
    assert.ok(b.glyphs > 0, `cell ${i} (${cameras[i].name}): no light glyphs in its name box`);
    if (i > 0) {
      assert.ok(b.width > boxes[i - 1].width, `cell ${i}'s name box (${cameras[i].name}) is not wider than cell ${i - 1}'s (${cameras[i - 1].name}): ${JSON.stringify(boxes)}`);
    }
  }

  // Killing the composite's ffmpeg child: the node starts another, and the
  // page's decoder goes on with the same track (one SSRC, no new
  // negotiation) to a new picture of the four cameras.
  const pid = childOf(node.proc.pid, `${comp.id}/composite.sdp`);
  assert.ok(pid > 0, "no ffmpeg child of the node reads the composite's SDP");
  const killed = Date.now();
  process.kill(pid, 'SIGKILL');
  const again = await waitFor(() => {
    const p = childOf(node.proc.pid, `${comp.id}/composite.sdp`);
    return p !== 0 && p !== pid && p;
  }, 30_000, 'another ffmpeg child');
  tt.diagnostic(`the killed child (pid ${pid}) was replaced by pid ${again} after ${Date.now() - killed} ms`);
  const { composites } = await node.api('GET', `/sessions/${s.id}/composites`);
  assert.ok(composites[0].restarts >= 1, `restarts ${composites[0].restarts} after a kill`);
  // Frames the page decoded since the new child started, not the last
  // picture of the old one.
  const decoded = async () => ((await remoteStats(pages[0]))[comp.member] || {}).framesDecoded || 0;
  const before = await decoded();
  await waitFor(async () => (await decoded()) >= before + 2 * FPS, 60_000, "the page decoding the new child's frames");
  await fourCameras("a decoded frame of the new child with the four cameras in their quadrants");
  tt.diagnostic(`the page showed the new child's picture ${Date.now() - killed} ms after the kill`);
});

// childOf is the PID of a child of pid whose command line has match (0
// for none).
function childOf(pid, match) {
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === pid && readFileSync(`/proc/${d}/cmdline`, 'utf8').includes(match)) return Number(d);
    } catch {} // gone meanwhile
  }
  return 0;
}

// cell is a quadrant's rectangle.
const cell = (f, i) => ({ x: (i % 2) * (f.w / 2), y: Math.floor(i / 2) * (f.h / 2), w: f.w / 2, h: f.h / 2 });

// quadrants are the mean colours of the quadrants' middles (clear of the
// name at the bottom), in layout order.
function quadrants(f) {
  return [0, 1, 2, 3].map((i) => {
    const c = cell(f, i);
    const cx = c.x + c.w / 2, cy = c.y + c.h / 2 - c.h / 8;
    return mean(f, Math.round(cx - c.w / 4), Math.round(cy - c.h / 5), Math.round(cx + c.w / 4), Math.round(cy + c.h / 5));
  });
}

// nameBox finds the name's box in a cell's bottom fifth: the columns with
// pixels far from the camera's colour (the box darkens it, the glyphs are
// white), and how many pixels are light glyphs on a darkened box.
function nameBox(f, i, rgb) {
  const c = cell(f, i);
  const px = (x, y) => [0, 1, 2].map((k) => f.px[((c.y + y) * f.w + c.x + x) * 4 + k]);
  const y0 = Math.round(c.h * 0.8), y1 = c.h - 2;
  let left = Infinity, right = -1, glyphs = 0;
  for (let y = y0; y < y1; y++) {
    for (let x = 0; x < c.w; x++) {
      if (!near(px(x, y), rgb, 60)) [left, right] = [Math.min(left, x), Math.max(right, x)];
    }
  }
  for (let y = y0; y < y1; y++) {
    for (let x = left; x <= right; x++) if (px(x, y).every((v) => v > 200)) glyphs++;
  }
  return { left, width: right - left + 1, glyphs };
}
