// The session's ordered event stream over a WebSocket, resumed after a
// reconnect from the last sequence number seen (?after=).

export type SessionEvent = { seq: number; type: string; time: string; data: any };

export class EventCursor {
  last = -1;
  // accept reports whether ev is new (a resumed stream may repeat one).
  accept(ev: { seq?: number }): boolean {
    if (typeof ev.seq !== 'number') return false;
    if (ev.seq <= this.last) return false;
    this.last = ev.seq;
    return true;
  }
  query(): string {
    return this.last >= 0 ? `&after=${this.last}` : '';
  }
}

// reconnectDelay backs off 0.5 s, 1 s, 2 s … up to 10 s.
export function reconnectDelay(attempt: number): number {
  return Math.min(10_000, 500 * 2 ** Math.max(0, attempt));
}

export class EventStream {
  private ws?: WebSocket;
  private attempt = 0;
  private closed = false;
  private paused = false;
  readonly cursor = new EventCursor();

  constructor(
    private session: string,
    private token: string,
    private onEvent: (ev: SessionEvent) => void,
    private onState: (connected: boolean) => void,
  ) {
    this.open();
  }

  private open() {
    if (this.closed || this.paused) return;
    const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
    const url = `${proto}//${location.host}/api/v1/sessions/${this.session}/events?token=${encodeURIComponent(this.token)}${this.cursor.query()}`;
    const ws = new WebSocket(url);
    this.ws = ws;
    ws.onopen = () => {
      this.attempt = 0;
      this.onState(true);
    };
    ws.onmessage = (m) => {
      const ev = JSON.parse(m.data);
      if (ev.type === 'stream.start') {
        if (this.cursor.last < 0) this.cursor.last = ev.last_seq ?? -1;
        return;
      }
      if (this.cursor.accept(ev)) this.onEvent(ev);
    };
    ws.onclose = (e) => {
      this.onState(false);
      if (this.closed || e.code === 1008) return; // 1008: the member has left
      setTimeout(() => this.open(), reconnectDelay(this.attempt++));
    };
  }

  close() {
    this.closed = true;
    this.ws?.close();
  }

  // pause drops the connection as a network outage would and keeps it
  // down until resume, which reconnects from the last event seen (tests
  // use it through window.convene).
  pause() {
    this.paused = true;
    this.ws?.close();
  }

  resume() {
    this.paused = false;
    this.open();
  }
}
