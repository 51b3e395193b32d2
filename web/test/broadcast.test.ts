import { describe, expect, it } from 'vitest';
import { ApiError } from '../src/api';
import { broadcastError, viewerState } from '../src/broadcast';
import { parseRoute, watchLink } from '../src/route';

describe('viewer link', () => {
  it('keeps the token in the fragment and parses back to the watch page', () => {
    const link = watchLink('http://127.0.0.1:8080', 's_1', 'cv1.a+b/c');
    const u = new URL(link);
    expect(u.pathname).toBe('/watch/s_1');
    expect(u.search).toBe('');
    expect(parseRoute(u.pathname, u.hash)).toEqual({ page: 'watch', session: 's_1', token: 'cv1.a+b/c' });
  });
});

describe('broadcast errors', () => {
  it('tells a busy server from one without ffmpeg or HLS', () => {
    expect(broadcastError(new ApiError(503, 'hls_busy', 'hls: the node runs as many'))).toMatch(/as many sessions as it can/);
    expect(broadcastError(new ApiError(503, 'unavailable', 'hls: ffmpeg is not installed (streaming.ffmpeg)'))).toMatch(/ffmpeg is not installed/);
    expect(broadcastError(new ApiError(503, 'unavailable', 'this node streams no HLS'))).toBe('This server does not broadcast sessions.');
    expect(broadcastError(new ApiError(503, 'over_capacity', 'x'))).toMatch(/active speaker instead/);
    expect(broadcastError(new ApiError(429, 'limit_reached', 'x'))).toMatch(/composites/);
  });
  it('says who may and what state is needed', () => {
    expect(broadcastError(new ApiError(403, 'forbidden', 'x'))).toMatch(/Only a chair/);
    expect(broadcastError(new ApiError(409, 'conflict', 'x'))).toMatch(/not active/);
    expect(broadcastError(new ApiError(500, 'internal', 'boom'))).toBe('Broadcast: boom');
    expect(broadcastError(new Error('offline'))).toBe('Broadcast: offline');
  });
});

describe('viewer page', () => {
  it('waits for a broadcast that has not started, and says when one has ended', () => {
    expect(viewerState(404, 'manifestLoadError', false)).toMatchObject({ message: 'Waiting for the broadcast to start…', alert: false });
    expect(viewerState(404, 'levelLoadError', true)).toMatchObject({ message: 'The broadcast has ended.', alert: false });
    expect(viewerState(404, 'levelLoadError', true).retryMs).toBeGreaterThan(0);
  });
  it('gives up on a bad link and retries everything else', () => {
    const bad = viewerState(401, 'manifestLoadError', false);
    expect(bad.alert).toBe(true);
    expect(bad.retryMs).toBeUndefined();
    expect(bad.message).toMatch(/not valid/);
    expect(viewerState(403, 'levelLoadError', true).retryMs).toBeGreaterThan(0);
    expect(viewerState(undefined, 'fragLoadError', true).message).toMatch(/lost/);
    expect(viewerState(500, 'levelLoadError', true).message).toMatch(/levelLoadError/);
    // The node held the first playlist past its limit (no segment yet).
    expect(viewerState(503, 'manifestLoadError', false)).toMatchObject({ message: 'Waiting for the broadcast to start…', alert: false });
    expect(viewerState(503, 'manifestLoadError', false).retryMs).toBeGreaterThan(0);
    expect(viewerState(503, 'levelLoadError', true).message).toMatch(/levelLoadError/);
  });
});
