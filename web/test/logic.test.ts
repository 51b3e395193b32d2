import { describe, expect, it } from 'vitest';
import { EventCursor, reconnectDelay } from '../src/events';
import { joinLink, parseRoute } from '../src/route';
import { describeStreams } from '../src/rtc';
import { qualityLabel, rtpQuality, rtpQualityLabel } from '../src/quality';
import { delay, duration, size } from '../src/format';

describe('routes', () => {
  it('parses a join link and keeps the token out of the path', () => {
    const link = joinLink('http://127.0.0.1:8080', 's_1', 'cv1.a+b/c');
    const u = new URL(link);
    expect(u.pathname).toBe('/join/s_1');
    expect(parseRoute(u.pathname, u.hash)).toEqual({ page: 'join', session: 's_1', joinToken: 'cv1.a+b/c' });
  });
  it('parses the room and falls back to home', () => {
    expect(parseRoute('/s/s_9', '')).toEqual({ page: 'room', session: 's_9' });
    expect(parseRoute('/', '')).toEqual({ page: 'home' });
    expect(parseRoute('/nowhere/x', '')).toEqual({ page: 'home' });
    expect(parseRoute('/recordings', '')).toEqual({ page: 'recordings' });
  });
  it('parses a viewer link', () => {
    expect(parseRoute('/watch/s_3', '#t=cv1.x%2By')).toEqual({ page: 'watch', session: 's_3', token: 'cv1.x+y' });
  });
});

describe('recordings', () => {
  it('shows durations and sizes as people read them', () => {
    expect(duration(0)).toBe('0:00');
    expect(duration(61_400)).toBe('1:01');
    expect(duration(3_723_000)).toBe('1:02:03');
    expect(size(512)).toBe('512 B');
    expect(size(1536)).toBe('1.5 KB');
    expect(size(5 * 1024 * 1024)).toBe('5.0 MB');
    expect(size(3 * 1024 ** 3)).toBe('3.00 GB');
  });
});

describe('event resume', () => {
  it('takes each event once, in order, and resumes after the last', () => {
    const c = new EventCursor();
    expect(c.query()).toBe('');
    expect(c.accept({ seq: 3 })).toBe(true);
    expect(c.accept({ seq: 4 })).toBe(true);
    expect(c.accept({ seq: 4 })).toBe(false); // repeated after a reconnect
    expect(c.accept({ seq: 2 })).toBe(false);
    expect(c.accept({})).toBe(false);
    expect(c.query()).toBe('&after=4');
  });
  it('backs off, capped', () => {
    expect(reconnectDelay(0)).toBe(500);
    expect(reconnectDelay(1)).toBe(1000);
    expect(reconnectDelay(20)).toBe(10_000);
  });
});

describe('signalling', () => {
  it('maps the node streams to members and sources', () => {
    const m = describeStreams([
      { id: 'm_1-camera-video', stream: 'm_1-camera', member: 'm_1', kind: 'video', source: 'camera' },
      { id: 'l_2-audio', stream: 'l_2', kind: 'audio', source: 'rtp' },
    ]);
    expect(m.get('m_1-camera')).toEqual({ member: 'm_1', source: 'camera' });
    expect(m.get('l_2')).toEqual({ member: 'l_2', source: 'rtp' });
  });
  it('formats quality', () => {
    expect(qualityLabel(undefined)).toBe('no report yet');
    expect(qualityLabel({ score: 'fair', loss: 0.031, rtt_ms: 120.4, jitter_ms: 3 })).toBe('fair, 3.1% loss, 120 ms');
  });
});

describe('node delay', () => {
  it('says a round trip, its loss, and when there is none', () => {
    expect(delay(0.00042, 0)).toBe('0.4 ms');
    expect(delay(0.0384, 0.25)).toBe('38 ms, 25 % lost');
    expect(delay(0, 0)).toBe('not measured yet');
    expect(delay(0, 1)).toBe('no reply');
  });
});

describe('RTP link quality', () => {
  const q = (fraction_lost: number, rtt_seconds = 0) => ({ reports: 1, fraction_lost, cumulative_lost: 3, jitter_seconds: 0.012, rtt_seconds });
  it('takes each member\'s worst RTP link and skips links without reports or member', () => {
    const got = rtpQuality([
      { id: 'l1', type: 'rtp', member: 'm1', stats: { quality: q(0.01) } },
      { id: 'l2', type: 'rtp', member: 'm1', stats: { quality: q(0.25) } },
      { id: 'l3', type: 'rtp', member: 'm2', stats: {} },
      { id: 'l4', type: 'rtp', stats: { quality: q(0.5) } },
      { id: 'l5', type: 'multicast', member: 'm3', stats: { quality: q(0.5) } },
    ]);
    expect(Object.keys(got)).toEqual(['m1']);
    expect(got.m1.fraction_lost).toBe(0.25);
  });
  it('says loss, jitter and the round trip when known', () => {
    expect(rtpQualityLabel(q(0.25))).toBe('RTP 25.0% loss, jitter 12 ms');
    expect(rtpQualityLabel(q(0, 0.035))).toBe('RTP 0.0% loss, jitter 12 ms, 35 ms');
  });
});
