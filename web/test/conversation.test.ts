import { describe, expect, it } from 'vitest';
import { Conversation, ConversationError, contextSize, marshal, unmarshal, type Delivery, type Message } from '../src/conversation';

// The shared vectors, run by the Go package too (vectors_test.go, wire_test.go).
declare global {
  interface ImportMeta {
    glob<T>(pattern: string, options: { eager: true; import: 'default' }): Record<string, T>;
  }
}

interface Vector {
  name: string;
  description: string;
  members: string[];
  receiver: string;
  flows: { id: number; name: string; delay_ms: number; loss_delay_ms: number }[];
  skew_ms: number;
  delta_ms: number;
  buffer: number;
  expect_delta_ms: number;
  messages: { id: string; from: string; seq: number; flow: number; sent_ms: number; context: Record<string, number>; payload: string }[];
  events: { at_ms: number; arrive?: string; tick?: boolean }[];
  expect: { at_ms: number; msg: string; status: string; missing?: { member: string; first: number; last: number }[] }[];
  expect_duplicates: number;
}

interface Wire {
  messages: { name: string; conversation: number; flow: number; sender: number; seq: number; sent_ms: number; context: { member: number; seq: number }[]; payload: string; hex: string }[];
  invalid: { name: string; hex: string }[];
}

const vectors = import.meta.glob<Vector>('../../internal/conversation/testdata/vectors/*.json', { eager: true, import: 'default' });
const wire = Object.values(import.meta.glob<Wire>('../../internal/conversation/testdata/wire.json', { eager: true, import: 'default' }))[0];

const hex = (b: Uint8Array) => Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
const unhex = (s: string) => new Uint8Array((s.match(/../g) ?? []).map((x) => parseInt(x, 16)));
const text = new TextEncoder();

describe('conversation vectors', () => {
  it('has at least 8', () => expect(Object.keys(vectors).length).toBeGreaterThanOrEqual(8));
  for (const v of Object.values(vectors)) {
    it(v.name, () => {
      const conv = new Conversation({
        id: 7,
        members: v.members,
        flows: v.flows.map((f) => ({ id: f.id, name: f.name, delay: f.delay_ms, lossDelay: f.loss_delay_ms })),
        skew: v.skew_ms,
        delta: v.delta_ms,
        buffer: v.buffer,
      });
      expect(conv.delta).toBe(v.expect_delta_ms);
      const member = (name: string) => {
        const id = conv.member(name);
        if (id === undefined) throw new Error(`unknown member ${name}`);
        return id;
      };
      const r = conv.receiver(member(v.receiver));
      const bytes = new Map<string, Uint8Array>();
      const names = new Map<string, string>();
      for (const m of v.messages) {
        const msg: Message = {
          conversation: 7, flow: m.flow, sender: member(m.from), seq: m.seq, sent: m.sent_ms,
          context: v.members.filter((n) => n in m.context).map((n) => ({ member: member(n), seq: m.context[n] })),
          payload: text.encode(m.payload),
        };
        bytes.set(m.id, marshal(msg));
        names.set(`${msg.sender}#${msg.seq}`, m.id);
      }
      const got: Vector['expect'] = [];
      const record = (at: number, ds: Delivery[]) => {
        for (const d of ds) {
          const e: Vector['expect'][number] = { at_ms: at, msg: names.get(`${d.message.sender}#${d.message.seq}`)!, status: d.status };
          if (d.missing.length > 0) e.missing = d.missing.map((g) => ({ member: v.members[g.member], first: g.first, last: g.last }));
          got.push(e);
        }
      };
      for (const e of v.events) {
        if (e.tick) record(e.at_ms, r.tick(e.at_ms));
        else record(e.at_ms, r.receive(unmarshal(bytes.get(e.arrive!)!), e.at_ms));
      }
      expect(got).toEqual(v.expect);
      expect(r.duplicates).toBe(v.expect_duplicates);
    });
  }
});

describe('conversation wire', () => {
  for (const w of wire.messages) {
    it(`encodes ${w.name}`, () => {
      const m: Message = { conversation: w.conversation, flow: w.flow, sender: w.sender, seq: w.seq, sent: w.sent_ms, context: w.context, payload: text.encode(w.payload) };
      expect(hex(marshal(m))).toBe(w.hex);
      const back = unmarshal(unhex(w.hex));
      expect({ ...back, payload: Array.from(back.payload) }).toEqual({ ...m, payload: Array.from(m.payload) });
      expect(contextSize(m)).toBeLessThan(unhex(w.hex).length);
    });
  }
  for (const w of wire.invalid) {
    it(`refuses ${w.name}`, () => expect(() => unmarshal(unhex(w.hex))).toThrow());
  }
  it('never throws anything but a ConversationError on random input', () => {
    let seed = 1;
    const rnd = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    for (let i = 0; i < 5000; i++) {
      const b = new Uint8Array(Math.floor(rnd() * 24)).map(() => Math.floor(rnd() * 256));
      if (b.length > 0 && rnd() < 0.8) b[0] = 1;
      try {
        const m = unmarshal(b);
        expect(hex(marshal(unmarshal(marshal(m))))).toBe(hex(marshal(m)));
      } catch (e) {
        expect((e as Error).constructor.name).toBe('ConversationError');
      }
    }
  });
});

describe('participant', () => {
  it('carries only direct dependencies and one sequence space across flows', () => {
    const conv = new Conversation({ id: 1, members: ['A', 'B', 'C'], flows: [{ id: 1, delay: 100, lossDelay: 300 }, { id: 2, delay: 50, lossDelay: 400 }] });
    const a = conv.participant(0);
    const b = conv.participant(1);
    const c = conv.participant(2);
    const a1 = a.send(1, text.encode('hi'), 1000);
    expect(b.receive(a1, 1010).map((d) => d.status)).toEqual(['delivered']);
    const b1 = b.send(2, text.encode('stroke'), 1020);
    expect(b1.context).toEqual([{ member: 0, seq: 1 }]);
    c.receive(a1, 1030);
    c.receive(b1, 1040);
    const c1 = c.send(1, new Uint8Array(), 1050);
    expect(c1.context).toEqual([{ member: 1, seq: 1 }]); // A1 is covered by B1
    expect(a.send(2, new Uint8Array(), 1060).seq).toBe(2);
  });
});

describe('members joining and pages reloading', () => {
  it('grows, resumes a sender after its history, resumes its own sequence', () => {
    const conv = new Conversation({ id: 1, members: ['node', 'a'], flows: [{ id: 1, delay: 100, lossDelay: 1000 }] });
    const r = conv.receiver(0);
    const m = { conversation: 1, flow: 1, sender: 2, seq: 5, sent: 1000, context: [], payload: new Uint8Array() };
    expect(() => r.receive(m, 1000)).toThrow(ConversationError);
    r.grow(3);
    expect(r.members).toBe(3);
    r.resume(2, 4);
    const out = r.receive(m, 1000);
    expect(out.map((d) => [d.message.seq, d.status, d.missing.length])).toEqual([[5, 'delivered', 0]]);
    const p = conv.participant(1);
    p.resumeSending(7);
    expect(p.send(1, new Uint8Array(), 1000).seq).toBe(8);
    expect(p.lastSeq).toBe(8);
  });
});
