import { describe, expect, it } from 'vitest';
import {
  MAX_MOVES,
  firstAnswering,
  moveLink,
  moveTarget,
  parseHandoff,
  refusedMessage,
  rejoinTarget,
  rejoinTargets,
  takeHandoff,
  type Alternative,
} from '../src/move';
import { parseRoute } from '../src/route';

const b: Alternative = { node: 'node-b', url: 'https://b.example:8443/', sip: 'b.example:5060', room_pps: 9000, token_valid: true };
const c: Alternative = { node: 'node-c', url: 'https://c.example', room_pps: 5000, token_valid: true };
const other: Alternative = { node: 'node-x', url: 'https://x.example', room_pps: 20000, token_valid: false };

describe('moving a member refused over capacity', () => {
  it('goes to the first node with room that takes its token', () => {
    expect(moveTarget([b, c], 0)).toBe(b);
    expect(moveTarget([other, c], 0)).toBe(c); // x has more room, but the token is not valid there
    expect(moveTarget([other], 0)).toBeUndefined();
    expect(moveTarget([{ ...b, url: undefined }], 0)).toBeUndefined(); // SIP only
    expect(moveTarget([{ ...b, url: 'javascript:alert(1)' }], 0)).toBeUndefined();
    expect(moveTarget(undefined, 0)).toBeUndefined();
  });
  it('stops after MAX_MOVES: two busy nodes do not bounce a member', () => {
    expect(moveTarget([b], MAX_MOVES - 1)).toBe(b);
    expect(moveTarget([b], MAX_MOVES)).toBeUndefined();
  });
  it('carries the token in the fragment to the room there, and the room takes it in', () => {
    const link = moveLink(b, 's_1', 'm_7', 'cv1.a+b/c', 0);
    const u = new URL(link);
    expect(u.origin).toBe('https://b.example:8443');
    expect(u.pathname).toBe('/s/s_1');
    expect(u.search).toBe(''); // never in the query: the fragment is not sent to a server
    const r = parseRoute(u.pathname, u.hash);
    expect(r).toEqual({ page: 'room', session: 's_1', handoff: { token: 'cv1.a+b/c', member: 'm_7', moves: 1 } });
    const store = new Map<string, string>();
    takeHandoff({ setItem: (k, v) => store.set(k, v) }, 's_1', parseHandoff(u.hash)!);
    expect(Object.fromEntries(store)).toEqual({ 'convene.token.s_1': 'cv1.a+b/c', 'convene.member.s_1': 'm_7', 'convene.moves.s_1': '1' });
  });
  it('reads a handoff only with a token and a member', () => {
    expect(parseHandoff('#t=x')).toBeUndefined();
    expect(parseHandoff('')).toBeUndefined();
    expect(parseHandoff('#t=x&m=y&moves=-3')?.moves).toBe(MAX_MOVES);
    expect(parseRoute('/s/s_1', '')).toEqual({ page: 'room', session: 's_1' });
  });
  it('tells a member it stays why, and where there is room', () => {
    expect(refusedMessage('would add 50', undefined, 0)).toBe('The server is busy, try again in a minute (would add 50)');
    expect(refusedMessage('x', [other], 0)).toContain('node-x (https://x.example)');
    expect(refusedMessage('x', [other], 0)).toContain('not valid there');
    expect(refusedMessage('x', [b], MAX_MOVES)).toContain('moved 2 times');
  });
});

describe('rejoining when the node goes', () => {
  it('goes to the first node named that takes the token, only when the node went', () => {
    expect(rejoinTarget([other, b, c], 1006)).toBe(b);
    expect(rejoinTarget([b], 1000)).toBeUndefined(); // the node closed the socket itself: left, removed, ended
    expect(rejoinTarget([b], 1001)).toBe(b); // going away: the node shuts down
    expect(rejoinTarget([b], 1008)).toBeUndefined(); // policy: the member's own doing
    expect(rejoinTarget([other], 1006)).toBeUndefined();
    expect(rejoinTarget([], 1006)).toBeUndefined(); // a lone node
    expect(rejoinTarget([b], 1006)).toBe(b); // after MAX_MOVES capacity moves too: a dead node is no ping-pong
  });
});

describe('rejoining when the node went', () => {
  it('tries every node its socket named, in order, and goes to the first that answers', async () => {
    expect(rejoinTargets([other, b, c], 1006)).toEqual([b, c]);
    expect(rejoinTargets([b, c], 1000)).toEqual([]);
    const asked: string[] = [];
    const probe = (alive: string[]) => async (url: string) => {
      asked.push(url);
      return alive.includes(url);
    };
    expect(await firstAnswering([b, c], probe([c.url!]))).toBe(c); // b died with ours
    expect(asked).toEqual([b.url, c.url]);
    expect(await firstAnswering([b, c], probe([]))).toBeUndefined(); // nobody answers: the page says so
    expect(await firstAnswering([b, c], probe([b.url!, c.url!]))).toBe(b);
  });
});
