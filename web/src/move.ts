// Moving a member to another node when its node is over capacity (issue
// 19): the join's error frame names the cluster's nodes with room, most
// room first. A member goes to the first whose URL it can load and that
// accepts its member token (the nodes sign with one key); the token and
// member travel in the URL's fragment, which the browser never sends to a
// server, and the room page there takes them into its sessionStorage.

export type Alternative = { node: string; url?: string; sip?: string; room_pps: number; token_valid: boolean };

// MAX_MOVES bounds the moves of one join: two nodes that each saw the
// other with room a heartbeat ago must not send a member back and forth.
export const MAX_MOVES = 2;

// moveTarget is the node a refused member moves to: the first alternative
// with a URL that accepts its token, unless it has moved MAX_MOVES times.
export function moveTarget(alts: Alternative[] | undefined, moves: number): Alternative | undefined {
  if (moves >= MAX_MOVES) return undefined;
  return (alts ?? []).find((a) => a.token_valid && !!a.url && /^https?:\/\//.test(a.url));
}

// moveLink is the room of session on alt's node, carrying the member's
// token, its ID and the moves so far in the fragment.
export function moveLink(alt: Alternative, session: string, member: string, token: string, moves: number): string {
  const h = new URLSearchParams({ t: token, m: member, moves: String(moves + 1) });
  return `${alt.url!.replace(/\/+$/, '')}/s/${encodeURIComponent(session)}#${h}`;
}

// Handoff is what a room page takes from a moved member's fragment.
export type Handoff = { token: string; member: string; moves: number };

export function parseHandoff(hash: string): Handoff | undefined {
  const p = new URLSearchParams(hash.replace(/^#/, ''));
  const token = p.get('t') ?? '';
  const member = p.get('m') ?? '';
  if (!token || !member) return undefined;
  const moves = Number(p.get('moves') ?? '0');
  return { token, member, moves: Number.isInteger(moves) && moves >= 0 ? moves : MAX_MOVES };
}

// takeHandoff keeps a moved member's token, ID and moves where the room
// page reads them (sessionStorage).
export function takeHandoff(store: Pick<Storage, 'setItem'>, session: string, h: Handoff) {
  store.setItem('convene.token.' + session, h.token);
  store.setItem('convene.member.' + session, h.member);
  store.setItem('convene.moves.' + session, String(h.moves));
}

// refusedMessage is what a member refused over capacity reads when it is
// not moved: which nodes have room, if any, and why it stays.
export function refusedMessage(message: string, alts: Alternative[] | undefined, moves: number): string {
  const named = (alts ?? []).filter((a) => a.url);
  if (named.length === 0) return `The server is busy, try again in a minute (${message})`;
  const list = named.map((a) => `${a.node} (${a.url})`).join(', ');
  if (moves >= MAX_MOVES && named.some((a) => a.token_valid)) {
    return `The servers are busy (moved ${moves} times already), try again in a minute. Servers that had room: ${list}.`;
  }
  return `The server is busy. These servers have room: ${list} — your link is not valid there: ask the organiser for a link on one of them.`;
}

// rejoinTarget is where a member whose node went rejoins (issue 16): the
// first node its signalling socket last named (the welcome and "nodes"
// frames) that takes its token. Only when the node went: the socket
// closed without a close frame (1006: the node died, or the network to it
// went) or with "going away" (1001: the node shuts down). A socket the
// node closed for a reason of the member's (it left or was removed, the
// session ended) is not a reason to go elsewhere.
export function rejoinTarget(nodes: Alternative[] | undefined, closeCode: number): Alternative | undefined {
  return rejoinTargets(nodes, closeCode)[0];
}

// rejoinTargets are every node a member whose node went may rejoin on, in
// the order its socket named them (rejoinTarget is the first).
export function rejoinTargets(nodes: Alternative[] | undefined, closeCode: number): Alternative[] {
  if (closeCode !== 1006 && closeCode !== 1001) return [];
  return (nodes ?? []).filter((a) => a.token_valid && !!a.url && /^https?:\/\//.test(a.url));
}

// answers resolves whether the node at url answers within ms (its
// /healthz; any answer will do, the node's policy lets a page ask the
// cluster's nodes). A node that died with ours does not, and a member
// sent there would land on a browser's error page.
export async function answers(url: string, ms = 2000): Promise<boolean> {
  try {
    await fetch(url.replace(/\/+$/, '') + '/healthz', { mode: 'no-cors', cache: 'no-store', signal: AbortSignal.timeout(ms) });
    return true;
  } catch {
    return false;
  }
}

// firstAnswering is the first of alts, in order, whose node answers (probe).
export async function firstAnswering(
  alts: Alternative[],
  probe: (url: string) => Promise<boolean> = answers,
): Promise<Alternative | undefined> {
  for (const a of alts) {
    if (await probe(a.url!)) return a;
  }
  return undefined;
}
