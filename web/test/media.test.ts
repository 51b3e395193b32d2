import { describe, expect, it } from 'vitest';
import { captureSize, simulcastLayers } from '../src/media';

describe('captureSize', () => {
  it('asks 640×360 of a machine of two cores or fewer, 1280×720 of more', () => {
    expect(captureSize(1)).toEqual({ width: 640, height: 360 });
    expect(captureSize(2)).toEqual({ width: 640, height: 360 });
    expect(captureSize(4)).toEqual({ width: 1280, height: 720 });
  });
});

describe('simulcastLayers', () => {
  const sizes = (h: number) => simulcastLayers(h).map((e) => Math.round(h / (e.scaleResolutionDownBy ?? 1)));
  it('sends three layers from 540 lines, two from 360, one below', () => {
    expect(sizes(720)).toEqual([180, 360, 720]);
    expect(sizes(540)).toEqual([135, 270, 540]);
    expect(sizes(360)).toEqual([180, 360]);
    expect(sizes(480)).toEqual([240, 480]);
    expect(sizes(240)).toEqual([240]);
  });
  it('always sends the full size, as the top layer', () => {
    for (const h of [180, 360, 540, 720, 1080]) {
      const ls = simulcastLayers(h);
      expect(ls[ls.length - 1].scaleResolutionDownBy ?? 1).toBe(1);
    }
  });
  it('names the layers of a simulcast camera l, m, h from the bottom (the node orders them so)', () => {
    expect(simulcastLayers(720).map((e) => e.rid)).toEqual(['l', 'm', 'h']);
    expect(simulcastLayers(360).map((e) => e.rid)).toEqual(['l', 'h']);
    expect(simulcastLayers(240)[0].rid).toBeUndefined();
  });
});
