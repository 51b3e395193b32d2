// A member's side of the session's conversation (internal/chat): its
// transport (transport.ts), the Δ-causal ordering of what arrives
// (conversation.ts), and lines for the chat panel. Messages of the chat flow carry UTF-8 text;
// the node relays them and never reads them.

import { reconnectDelay } from './events';
import { Conversation, ConversationError, marshal, unmarshal, type Delivery, type Message, type Participant } from './conversation';
import { dataChannelTransport, webSocketTransport, type Transport, type TransportKind } from './transport';

export const FLOW_CHAT = 1;
export const FLOW_BOARD = 2;
export const FLOW_POINTER = 3; // a member's pointer on the whiteboard (board.ts)
export const FLOW_NOTES = 4; // the shared notes, the whole document (notes.ts)

// MAX_MESSAGE is the most bytes of one message the node takes, header included.
export const MAX_MESSAGE = 16 * 1024;

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
  pointer?(from: number, payload: Uint8Array): void;
  notes?(from: number, seq: number, payload: Uint8Array): void;
  state(connected: boolean): void;
  error(message: string): void;
  transport?(kind: TransportKind | undefined): void;
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

// link is one transport and what arrived on it before its hello (a data
// channel is unordered: a message may overtake the hello).
type Link = { t: Transport; hello: boolean; early: (string | Uint8Array)[] };

// Chat is the member's side of the conversation. It talks over the
// conversation WebSocket until useChannel hands it the meeting's data
// channel; once that channel's hello came, it talks there and closes the
// socket, and goes back to the socket if the channel closes. Each hello
// carries the history and every sender's last sequence number, so a
// change of transport, a reconnect or a reload shows each message once.
export class Chat {
  private ws?: Link;
  private dc?: Link;
  private active?: Link; // the one we send on: its hello came
  private attempt = 0;
  private closed = false;
  private me?: Participant;
  private names = new Map<number, string>();
  private ids = new Map<number, string>(); // member numbers' member IDs
  private timer?: ReturnType<typeof setTimeout>;
  private retry?: ReturnType<typeof setTimeout>;
  private seen = new Set<string>(); // sender/seq shown, so a reconnect's history repeats nothing

  constructor(
    private session: string,
    private token: string,
    private on: ChatEvents,
  ) {
    this.open();
  }

  get ready(): boolean {
    return !!this.me && !!this.active?.t.open;
  }

  get self(): number | undefined {
    return this.me?.self;
  }

  // transport is what the chat talks over now.
  get transport(): TransportKind | undefined {
    return this.active?.t.kind;
  }

  // name is a member's name by its number.
  name(n: number): string {
    return this.names.get(n) ?? `member ${n}`;
  }

  // memberId is a member's ID (the session's) by its number.
  memberId(n: number): string | undefined {
    return this.ids.get(n);
  }

  // open opens the WebSocket, unless the data channel carries the chat.
  private open() {
    clearTimeout(this.retry);
    if (this.closed || this.ws || (this.dc && this.active === this.dc)) return;
    const l: Link = {
      t: webSocketTransport(this.session, this.token, { frame: (f) => this.onFrame(l, f), closed: () => this.onClosed(l) }),
      hello: false,
      early: [],
    };
    this.ws = l;
  }

  // useChannel carries the chat over the meeting's "conversation" data
  // channel from its hello on.
  useChannel(dc: RTCDataChannel) {
    if (this.closed) return dc.close();
    this.dc?.t.close();
    const l: Link = { t: dataChannelTransport(dc, { frame: (f) => this.onFrame(l, f), closed: () => this.onClosed(l) }), hello: false, early: [] };
    this.dc = l;
  }

  private onClosed(l: Link) {
    if (this.ws === l) this.ws = undefined;
    if (this.dc === l) this.dc = undefined;
    if (this.active === l) {
      this.active = undefined;
      this.on.state(false);
      this.on.transport?.(undefined);
    }
    if (this.closed || this.ws) return;
    if (l.t.kind === 'datachannel') this.open();
    else if (!this.dc || this.active !== this.dc) this.retry = setTimeout(() => this.open(), reconnectDelay(this.attempt++));
  }

  private onFrame(l: Link, f: string | Uint8Array) {
    if (typeof f === 'string') {
      const o = JSON.parse(f);
      if (o.type === 'hello') {
        this.onHello(l, o as Hello);
        l.early.splice(0).forEach((e) => this.onFrame(l, e));
        return;
      }
      if (!l.hello) return void l.early.push(f);
      this.onText(o);
    } else if (!l.hello) l.early.push(f);
    else this.onMessage(f);
  }

  private onText(f: any) {
    switch (f.type) {
      case 'member':
        this.names.set(f.n, f.name);
        this.ids.set(f.n, f.id);
        this.me?.grow(f.n + 1);
        break;
      case 'error':
        this.on.error(f.message ?? f.code);
        break;
    }
  }

  private onHello(l: Link, h: Hello) {
    l.hello = true;
    this.attempt = 0;
    const n = Math.max(h.self, ...Object.keys(h.members).map(Number)) + 1;
    for (const [k, m] of Object.entries(h.members)) {
      this.names.set(Number(k), m.name);
      this.ids.set(Number(k), m.id);
    }
    let me = this.me;
    if (!me || me.conv.spec.id !== h.conversation || me.self !== h.self) {
      const members = Array.from({ length: n }, (_, i) => h.members[i]?.id ?? (i === 0 ? 'node' : ''));
      const conv = new Conversation({
        id: h.conversation,
        members,
        flows: h.flows.map((f) => ({ id: f.id, name: f.name, delay: f.delay_ms, lossDelay: f.loss_delay_ms })),
        skew: h.skew_ms,
        delta: h.delta_ms,
      });
      me = conv.participant(h.self);
      this.me = me;
    }
    // Another transport of the same page: the participant goes on (its
    // own sequence may be ahead of what the node had accepted when it
    // wrote this hello); what the history holds counts as delivered.
    me.grow(n);
    me.resumeSending(h.last[h.self] ?? 0);
    for (const [k, seq] of Object.entries(h.last)) me.resume(Number(k), seq);
    for (const b of h.history) {
      try {
        this.show({ message: unmarshal(fromBase64(b)), status: 'delivered', missing: [] });
      } catch {
        // a stored message this page cannot read: skip it
      }
    }
    this.active = l;
    if (l === this.dc && this.ws) {
      const ws = this.ws;
      this.ws = undefined;
      ws.t.close();
    }
    this.on.state(true);
    this.on.transport?.(l.t.kind);
  }

  private onMessage(b: Uint8Array) {
    if (!this.me) return;
    let msg: Message;
    try {
      msg = unmarshal(b);
      // Our own, forwarded to our other transport while both were open.
      if (msg.sender === this.me.self) return;
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
    if (m.flow === FLOW_POINTER) {
      // A position that came after its deadline is stale: the next one
      // supersedes it.
      if (d.status !== 'late') this.on.pointer?.(m.sender, m.payload);
      return;
    }
    if (m.flow === FLOW_NOTES) {
      this.on.notes?.(m.sender, m.seq, m.payload);
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

  // fits says whether a payload of n bytes is sure to fit in a message
  // with its header (whose causal context grows with the members).
  fits(n: number): boolean {
    return n + 48 + 16 * (this.me?.members ?? 0) <= MAX_MESSAGE;
  }

  // send sends text on the chat flow (or a payload on another flow) and
  // shows it at once; false if no transport is open or it is too big
  // (checked before it takes a sequence number: a number never sent
  // would be reported missing by every other member).
  send(payload: string | Uint8Array, flow = FLOW_CHAT): boolean {
    if (!this.me || !this.active?.t.open) return false;
    const body = typeof payload === 'string' ? new TextEncoder().encode(payload) : payload;
    if (!this.fits(body.length)) return false;
    const m = this.me.send(flow, body, Date.now());
    this.active.t.send(marshal(m));
    this.show({ message: m, status: 'delivered', missing: [] });
    return true;
  }

  close() {
    this.closed = true;
    clearTimeout(this.timer);
    clearTimeout(this.retry);
    this.ws?.t.close();
    this.dc?.t.close();
  }
}
