// How the session's conversation travels between this page and the node:
// the conversation WebSocket, or the "conversation" data channel on the
// meeting's publisher connection (rtc.ts). Both carry the same frames —
// binary: one message in conversation.ts's wire form; text: JSON (hello,
// member, error) — and each starts with a hello, so chat.ts treats them
// alike.

export type TransportKind = 'websocket' | 'datachannel';

export type TransportEvents = {
  frame(data: string | Uint8Array): void;
  closed(): void; // once
};

export interface Transport {
  readonly kind: TransportKind;
  readonly open: boolean;
  send(b: Uint8Array): boolean; // false if not open
  close(): void;
}

export function webSocketTransport(session: string, token: string, on: TransportEvents): Transport {
  const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
  const ws = new WebSocket(`${proto}//${location.host}/api/v1/sessions/${session}/conversation?token=${encodeURIComponent(token)}`);
  ws.binaryType = 'arraybuffer';
  ws.onmessage = (m) => on.frame(typeof m.data === 'string' ? m.data : new Uint8Array(m.data as ArrayBuffer));
  ws.onclose = () => on.closed();
  return {
    kind: 'websocket',
    get open() {
      return ws.readyState === WebSocket.OPEN;
    },
    send(b) {
      if (ws.readyState !== WebSocket.OPEN) return false;
      ws.send(b);
      return true;
    },
    close: () => ws.close(),
  };
}

// dataChannelTransport carries the conversation over dc (reliable and
// unordered: the conversation orders messages itself, so a lost packet
// holds back nothing else, see ARCHITECTURE.md).
export function dataChannelTransport(dc: RTCDataChannel, on: TransportEvents): Transport {
  dc.binaryType = 'arraybuffer';
  let ended = false;
  const end = () => {
    if (ended) return;
    ended = true;
    on.closed();
  };
  dc.onmessage = (m) => on.frame(typeof m.data === 'string' ? m.data : new Uint8Array(m.data as ArrayBuffer));
  dc.onclose = end;
  dc.onerror = () => {
    dc.close();
    end();
  };
  if (dc.readyState === 'closing' || dc.readyState === 'closed') queueMicrotask(end);
  return {
    kind: 'datachannel',
    get open() {
      return dc.readyState === 'open';
    },
    send(b) {
      if (dc.readyState !== 'open') return false;
      dc.send(b as Uint8Array<ArrayBuffer>); // marshal's bytes: never a SharedArrayBuffer
      return true;
    },
    close: () => dc.close(),
  };
}
