// A member's side of the session's conversation (internal/chat): the
// socket, the Δ-causal ordering of what arrives (conversation.ts), and
// lines for the chat panel. Messages of the chat flow carry UTF-8 text;
// the node relays them and never reads them.

import { reconnectDelay } from './events';
import { Conversation, ConversationError, marshal, unmarshal, type Delivery, type Message, type Participant } from './conversation';

export const FLOW_CHAT = 1;
export const FLOW_BOARD = 2;

// ChatLine is one line of the chat panel: a message, or a notice of
// messages that never came.
export type ChatLine = {
  key: string;
  kind: 'message' | 'missing';
  from: string; // the sender's name
  text: string;
  sent: number; // ms since the epoch
  late?: boolean; // delivered after its deadline: shown where it fell, marked
  mine?: boolean;
};

export type ChatEvents = {
  line(l: ChatLine): void;
  board?(from: number, payload: Uint8Array): void;
  state(connected: boolean): void;
  error(message: string): void;
};

type Hello = {
  type: 'hello';
  conversation: number;
  self: number;
  delta_ms: number;
  skew_ms: number;
  flows: { id: number; name: string; delay_ms: number; loss_delay_ms: number }[];
  members: Record<string, { id: string; name: string }>;
  last: Record<string, number>;
  history: string[];
};

const text = new TextDecoder();

function fromBase64(s: string): Uint8Array {
  const b = atob(s);
  const out = new Uint8Array(b.length);
  for (let i = 0; i < b.length; i++) out[i] = b.charCodeAt(i);
  return out;
}

export class Chat {
  private ws?: WebSocket;
  private attempt = 0;
  private closed = false;
  private me?: Participant;
  private names = new Map<number, string>();
  private timer?: ReturnType<typeof setTimeout>;
  private seen = new Set<string>(); // sender/seq shown, so a reconnect's history repeats nothing

  constructor(
    private session: string,
    private token: string,
    private on: ChatEvents,
  ) {
    this.open();
  }

  get ready(): boolean {
    return !!this.me && this.ws?.readyState === WebSocket.OPEN;
  }

  get self(): number | undefined {
    return this.me?.self;
  }

  // name is a member's name by its number.
  name(n: number): string {
    return this.names.get(n) ?? `member ${n}`;
  }

  private open() {
    if (this.closed) return;
    const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
    const ws = new WebSocket(`${proto}//${location.host}/api/v1/sessions/${this.session}/conversation?token=${encodeURIComponent(this.token)}`);
    ws.binaryType = 'arraybuffer';
    this.ws = ws;
    ws.onmessage = (m) => {
      if (typeof m.data === 'string') this.onText(JSON.parse(m.data));
      else this.onMessage(new Uint8Array(m.data as ArrayBuffer));
    };
    ws.onclose = () => {
      this.on.state(false);
      if (this.closed) return;
      setTimeout(() => this.open(), reconnectDelay(this.attempt++));
    };
  }

  private onText(f: any) {
    switch (f.type) {
      case 'hello':
        this.onHello(f as Hello);
        break;
      case 'member':
        this.names.set(f.n, f.name);
        this.me?.grow(f.n + 1);
        break;
      case 'error':
        this.on.error(f.message ?? f.code);
        break;
    }
  }

  private onHello(h: Hello) {
    this.attempt = 0;
    const n = Math.max(h.self, ...Object.keys(h.members).map(Number)) + 1;
    const members = Array.from({ length: n }, (_, i) => h.members[i]?.id ?? (i === 0 ? 'node' : ''));
    for (const [k, m] of Object.entries(h.members)) this.names.set(Number(k), m.name);
    const conv = new Conversation({
      id: h.conversation,
      members,
      flows: h.flows.map((f) => ({ id: f.id, name: f.name, delay: f.delay_ms, lossDelay: f.loss_delay_ms })),
      skew: h.skew_ms,
      delta: h.delta_ms,
    });
    const me = conv.participant(h.self);
    me.resumeSending(h.last[h.self] ?? 0);
    for (const [k, seq] of Object.entries(h.last)) me.resume(Number(k), seq);
    this.me = me;
    for (const b of h.history) {
      try {
        this.show({ message: unmarshal(fromBase64(b)), status: 'delivered', missing: [] });
      } catch {
        // a stored message this page cannot read: skip it
      }
    }
    this.on.state(true);
  }

  private onMessage(b: Uint8Array) {
    if (!this.me) return;
    let msg: Message;
    try {
      msg = unmarshal(b);
      this.me.grow(msg.sender + 1);
      for (const d of msg.context) this.me.grow(d.member + 1);
      this.deliver(this.me.receive(msg, Date.now()));
    } catch (e) {
      if (e instanceof ConversationError) this.on.error('A message could not be read: ' + e.message);
      else throw e;
    }
  }

  private deliver(ds: Delivery[]) {
    for (const d of ds) this.show(d);
    clearTimeout(this.timer);
    const next = this.me?.nextDeadline();
    if (next !== undefined) this.timer = setTimeout(() => this.deliver(this.me!.tick(Date.now())), Math.max(0, next - Date.now()) + 1);
  }

  private show(d: Delivery) {
    const m = d.message;
    for (const g of d.missing) {
      const who = this.names.get(g.member) ?? `member ${g.member}`;
      const what = g.first === g.last ? 'A message' : `${g.last - g.first + 1} messages`;
      this.on.line({ key: `missing-${g.member}-${g.first}`, kind: 'missing', from: who, text: `${what} from ${who} never arrived`, sent: Date.now() });
    }
    const key = `${m.sender}/${m.seq}`;
    if (this.seen.has(key)) return;
    this.seen.add(key);
    if (m.flow === FLOW_BOARD) {
      this.on.board?.(m.sender, m.payload);
      return;
    }
    if (m.flow !== FLOW_CHAT) return;
    this.on.line({
      key,
      kind: 'message',
      from: this.names.get(m.sender) ?? `member ${m.sender}`,
      text: text.decode(m.payload),
      sent: m.sent,
      late: d.status === 'late',
      mine: m.sender === this.me?.self,
    });
  }

  // send sends text on the chat flow (or a payload on another flow) and
  // shows it at once; false if the socket is not open.
  send(payload: string | Uint8Array, flow = FLOW_CHAT): boolean {
    if (!this.me || this.ws?.readyState !== WebSocket.OPEN) return false;
    const body = typeof payload === 'string' ? new TextEncoder().encode(payload) : payload;
    const m = this.me.send(flow, body, Date.now());
    this.ws.send(marshal(m));
    this.show({ message: m, status: 'delivered', missing: [] });
    return true;
  }

  close() {
    this.closed = true;
    clearTimeout(this.timer);
    this.ws?.close();
  }
}
