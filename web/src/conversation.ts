// Multi-flow conversations: the same header encoding and receiver as the
// Go package internal/conversation (read its package doc), so the web app
// delivers chat and strokes in the same order as the node and Go clients.
// Both run the shared vectors in internal/conversation/testdata.
//
// Times are milliseconds (Unix epoch for send times). Δ = max(delta,
// Δ1 + 2ε) with Δ1 = max δ, Δ2 = min λ over the flows, Δ < Δ2 (the MCP
// seed's Δ-causality). A sender's messages share one sequence space across
// flows; each carries its direct dependencies since its previous message.

export type MemberID = number;

export interface Flow {
  id: number;
  name?: string;
  delay: number; // δ, ms
  lossDelay: number; // λ, ms
}

export interface Spec {
  id: number;
  members: string[]; // a member's id is its index
  flows: Flow[];
  skew?: number; // ε, ms
  delta?: number; // Δ chosen by the provider, ms
  buffer?: number; // cap on held messages, default 1024
}

export interface Dep {
  member: MemberID;
  seq: number; // depends on member's messages up to seq
}

export interface Message {
  conversation: number;
  flow: number;
  sender: MemberID;
  seq: number; // from 1
  sent: number; // Unix ms
  context: Dep[]; // ascending by member, never the sender
  payload: Uint8Array;
}

export type Status = 'delivered' | 'expired' | 'overflow' | 'late';

export interface Gap {
  member: MemberID;
  first: number;
  last: number;
}

export interface Delivery {
  message: Message;
  status: Status;
  missing: Gap[];
}

export class ConversationError extends Error {}

export const VERSION = 1;
export const MAX_INT = Number.MAX_SAFE_INTEGER; // 2^53 − 1
const MAX_U32 = 0xffffffff;
const MAX_GAPS = 64;

function putUvarint(out: number[], n: number): void {
  while (n >= 0x80) {
    out.push((n % 0x80) | 0x80);
    n = Math.floor(n / 0x80);
  }
  out.push(n);
}

function uvarintLen(n: number): number {
  let len = 1;
  while (n >= 0x80) {
    n = Math.floor(n / 0x80);
    len++;
  }
  return len;
}

// marshal encodes m: version byte, then varints conversation, flow, sender,
// seq, sent, context count, (member gap, seq) pairs; the payload is the rest.
export function marshal(m: Message): Uint8Array {
  const out: number[] = [VERSION];
  for (const v of [m.conversation, m.flow, m.sender, m.seq, m.sent, m.context.length]) putUvarint(out, v);
  let prev = -1;
  for (const d of m.context) {
    putUvarint(out, d.member - prev - 1);
    putUvarint(out, d.seq);
    prev = d.member;
  }
  const b = new Uint8Array(out.length + m.payload.length);
  b.set(out);
  b.set(m.payload, out.length);
  return b;
}

// contextSize is the bytes m's context takes on the wire, count included.
export function contextSize(m: Message): number {
  let n = uvarintLen(m.context.length);
  let prev = -1;
  for (const d of m.context) {
    n += uvarintLen(d.member - prev - 1) + uvarintLen(d.seq);
    prev = d.member;
  }
  return n;
}

class Reader {
  pos = 0;
  constructor(readonly b: Uint8Array) {}
  // uint reads a varint as Go's binary.Uvarint does, then checks its limit.
  uint(limit: number): number {
    let x = 0;
    let scale = 1;
    for (let i = 0; ; i++) {
      if (this.pos + i >= this.b.length) throw new ConversationError('conversation: truncated header');
      if (i === 10) throw new ConversationError('conversation: header field out of range');
      const c = this.b[this.pos + i];
      if (c < 0x80) {
        if (i === 9 && c > 1) throw new ConversationError('conversation: header field out of range');
        x += c * scale;
        this.pos += i + 1;
        if (x > limit) throw new ConversationError('conversation: header field out of range');
        return x;
      }
      x += (c & 0x7f) * scale;
      scale *= 0x80;
    }
  }
}

// unmarshal decodes outside input; it throws ConversationError on anything
// malformed. The payload is a view into b.
export function unmarshal(b: Uint8Array): Message {
  if (b.length === 0) throw new ConversationError('conversation: truncated header');
  if (b[0] !== VERSION) throw new ConversationError('conversation: unknown wire version');
  const r = new Reader(b);
  r.pos = 1;
  const conversation = r.uint(MAX_INT);
  const flow = r.uint(MAX_U32);
  const sender = r.uint(MAX_U32);
  const seq = r.uint(MAX_INT);
  const sent = r.uint(MAX_INT);
  const n = r.uint(MAX_INT);
  if (seq === 0) throw new ConversationError('conversation: header field out of range');
  if (n > Math.floor((b.length - r.pos) / 2)) throw new ConversationError('conversation: truncated header');
  const context: Dep[] = [];
  let prev = -1;
  for (let i = 0; i < n; i++) {
    const gap = r.uint(MAX_U32);
    const s = r.uint(MAX_INT);
    const member = prev + 1 + gap;
    if (member > MAX_U32 || s === 0) throw new ConversationError('conversation: header field out of range');
    if (member === sender) throw new ConversationError('conversation: context not ascending or names the sender');
    context.push({ member, seq: s });
    prev = member;
  }
  return { conversation, flow, sender, seq, sent, context, payload: b.subarray(r.pos) };
}

export class Conversation {
  readonly delta: number;
  readonly buffer: number;
  readonly flows: Map<number, Flow>;
  constructor(readonly spec: Spec) {
    if (spec.members.length === 0 || spec.flows.length === 0) throw new ConversationError('conversation: no members or flows');
    const skew = spec.skew ?? 0;
    this.buffer = spec.buffer || 1024;
    this.flows = new Map();
    let d1 = 0;
    let d2 = Infinity;
    for (const f of spec.flows) {
      if (this.flows.has(f.id)) throw new ConversationError(`conversation: flow ${f.id} twice`);
      if (f.delay <= 0 || f.lossDelay <= f.delay) throw new ConversationError(`conversation: flow ${f.id} needs 0 < δ < λ`);
      this.flows.set(f.id, f);
      d1 = Math.max(d1, f.delay);
      d2 = Math.min(d2, f.lossDelay);
    }
    this.delta = Math.max(spec.delta ?? 0, d1 + 2 * skew);
    if (this.delta >= d2) throw new ConversationError(`conversation: Δ ${this.delta} ms is not below Δ2 = ${d2} ms`);
  }
  member(name: string): MemberID | undefined {
    const i = this.spec.members.indexOf(name);
    return i < 0 ? undefined : i;
  }
  receiver(self: MemberID): Receiver {
    return new Receiver(this, self);
  }
  participant(self: MemberID): Participant {
    return new Participant(this, self);
  }
}

interface Held {
  m: Message;
  deadline: number;
  late: boolean;
}

interface Peer {
  next: number;
  queue: Held[]; // ascending seq, all ≥ next
  gaps: Gap[];
}

// Receiver orders one member's incoming messages: the Go Receiver's rules,
// with plain scans where Go keeps heaps (the order is the same: earliest
// deadline, then lowest sender, among what may go).
export class Receiver {
  protected readonly peers: Peer[];
  protected readonly frontier = new Map<MemberID, number>();
  held = 0;
  duplicates = 0;
  private forcing: Dep[] = [];

  constructor(readonly conv: Conversation, readonly self: MemberID) {
    if (self < 0 || self >= conv.spec.members.length) throw new ConversationError('conversation: unknown member');
    this.peers = conv.spec.members.map(() => ({ next: 1, queue: [], gaps: [] }));
  }

  nextDeadline(): number | undefined {
    return this.earliest()?.deadline;
  }

  // grow makes room for senders up to n-1 (members who joined later).
  grow(n: number): void {
    while (this.peers.length < n) this.peers.push({ next: 1, queue: [], gaps: [] });
  }

  get members(): number {
    return this.peers.length;
  }

  // resume starts sender m's order after seq (its earlier messages were
  // handled before: a page's history); it only moves forward.
  resume(m: MemberID, seq: number): void {
    const p = this.peers[m];
    if (!p || m === this.self || p.queue.length > 0) return;
    if (seq + 1 > p.next) p.next = seq + 1;
  }

  // receive takes msg, arrived at now (ms), and returns what is deliverable.
  receive(msg: Message, now: number): Delivery[] {
    this.check(msg);
    const out: Delivery[] = [];
    this.expire(now, false, out);
    const p = this.peers[msg.sender];
    if (msg.seq < p.next) {
      if (takeGap(p, msg.seq)) out.push({ message: msg, status: 'late', missing: [] });
      else this.duplicates++;
    } else if (p.queue.some((h) => h.m.seq === msg.seq)) {
      this.duplicates++;
    } else {
      const h: Held = { m: msg, deadline: Math.min(msg.sent, now) + this.conv.delta, late: now - msg.sent > this.conv.delta };
      let i = 0;
      while (i < p.queue.length && p.queue[i].m.seq < msg.seq) i++;
      p.queue.splice(i, 0, h);
      this.held++;
      if (h.late) this.force(h, 'late', out);
      this.drain(out);
      while (this.held > this.conv.buffer) {
        this.force(this.earliest()!, 'overflow', out);
        this.drain(out);
      }
    }
    this.expire(now, true, out);
    return out;
  }

  tick(now: number): Delivery[] {
    const out: Delivery[] = [];
    this.expire(now, true, out);
    return out;
  }

  private check(m: Message): void {
    if (m.conversation !== this.conv.spec.id) throw new ConversationError('conversation: message of another conversation');
    if (!this.conv.flows.has(m.flow)) throw new ConversationError('conversation: unknown flow');
    const n = this.peers.length;
    if (m.sender >= n || m.sender === this.self || m.seq === 0) throw new ConversationError('conversation: unknown member');
    m.context.forEach((d, i) => {
      if (d.member >= n || d.member === m.sender || (i > 0 && d.member <= m.context[i - 1].member))
        throw new ConversationError('conversation: context not ascending or names the sender');
    });
  }

  private expire(now: number, inclusive: boolean, out: Delivery[]): void {
    for (;;) {
      const h = this.earliest();
      if (!h || h.deadline > now || (!inclusive && h.deadline === now)) return;
      this.force(h, 'expired', out);
      this.drain(out);
    }
  }

  private earliest(): Held | undefined {
    let best: Held | undefined;
    for (const p of this.peers) {
      const h = p.queue[0];
      if (h && (!best || before(h, best))) best = h;
    }
    return best;
  }

  private satisfied(m: Message): boolean {
    return m.context.every((d) => d.member === this.self || this.peers[d.member].next > d.seq);
  }

  private drain(out: Delivery[]): void {
    for (;;) {
      let best: Held | undefined;
      for (const p of this.peers) {
        const h = p.queue[0];
        if (h && h.m.seq === p.next && this.satisfied(h.m) && (!best || before(h, best))) best = h;
      }
      if (!best) return;
      this.deliver(best, best.late ? 'late' : 'delivered', [], out);
    }
  }

  // force delivers h now: first the held messages it depends on, declaring
  // missing the ones that never came.
  private force(h: Held, st: Status, out: Delivery[]): void {
    this.remove(h);
    this.forcing.push({ member: h.m.sender, seq: h.m.seq });
    const nested: Status = st === 'late' ? 'expired' : st;
    const missing: Gap[] = [];
    const resolve = (d: Dep): void => {
      const p = this.peers[d.member];
      while (p.next <= d.seq) {
        if (p.queue.length > 0 && p.queue[0].m.seq === p.next) {
          this.force(p.queue[0], nested, out);
          continue;
        }
        let last = d.seq;
        if (p.queue.length > 0 && p.queue[0].m.seq <= last) last = p.queue[0].m.seq - 1;
        if (this.forcing.some((f) => f.member === d.member && f.seq >= p.next && f.seq <= last)) return;
        const g = { member: d.member, first: p.next, last };
        missing.push(g);
        if (p.gaps.length === MAX_GAPS) p.gaps.shift();
        p.gaps.push({ ...g });
        p.next = last + 1;
      }
    };
    let own = false;
    for (const d of h.m.context) {
      if (!own && h.m.sender < d.member) {
        own = true;
        resolve({ member: h.m.sender, seq: h.m.seq - 1 });
      }
      if (d.member !== this.self) resolve(d);
    }
    if (!own) resolve({ member: h.m.sender, seq: h.m.seq - 1 });
    this.forcing.pop();
    this.deliver(h, h.late ? 'late' : st, missing, out);
  }

  private deliver(h: Held, st: Status, missing: Gap[], out: Delivery[]): void {
    this.remove(h);
    const p = this.peers[h.m.sender];
    p.next = Math.max(p.next, h.m.seq + 1);
    for (const d of h.m.context) {
      const q = this.frontier.get(d.member);
      if (q !== undefined && q <= d.seq) this.frontier.delete(d.member);
    }
    this.frontier.set(h.m.sender, Math.max(this.frontier.get(h.m.sender) ?? 0, h.m.seq));
    out.push({ message: h.m, status: st, missing });
  }

  private remove(h: Held): void {
    const q = this.peers[h.m.sender].queue;
    const i = q.indexOf(h);
    if (i < 0) return;
    q.splice(i, 1);
    this.held--;
  }
}

function before(a: Held, b: Held): boolean {
  return a.deadline !== b.deadline ? a.deadline < b.deadline : a.m.sender < b.m.sender;
}

function takeGap(p: Peer, seq: number): boolean {
  const i = p.gaps.findIndex((g) => seq >= g.first && seq <= g.last);
  if (i < 0) return false;
  const g = p.gaps[i];
  if (g.first === g.last) p.gaps.splice(i, 1);
  else if (seq === g.first) g.first++;
  else if (seq === g.last) g.last--;
  else {
    p.gaps.splice(i + 1, 0, { member: g.member, first: seq + 1, last: g.last });
    g.last = seq - 1;
    if (p.gaps.length > MAX_GAPS) p.gaps.shift();
  }
  return true;
}

// Participant sends as well as receives: its messages carry what it
// delivered since its previous message that nothing later depends on.
export class Participant extends Receiver {
  private seq = 0;
  // resumeSending continues after seq, the last message sent before (a reload).
  resumeSending(seq: number): void {
    if (seq > this.seq) this.seq = seq;
  }
  get lastSeq(): number {
    return this.seq;
  }
  send(flow: number, payload: Uint8Array, now: number): Message {
    if (!this.conv.flows.has(flow)) throw new ConversationError('conversation: unknown flow');
    const context = [...this.frontier].map(([member, seq]) => ({ member, seq })).sort((a, b) => a.member - b.member);
    this.frontier.clear();
    this.seq++;
    return { conversation: this.conv.spec.id, flow, sender: this.self, seq: this.seq, sent: Math.floor(now), context, payload };
  }
}
