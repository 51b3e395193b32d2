// The browser side of docs/signalling.md: a publisher connection we offer
// on and a subscriber connection the node offers on.

import type { Alternative } from './move';
import { simulcastLayers } from './media';

export type TrackDesc = { id: string; stream: string; member?: string; kind: string; source: string; layers?: number };
export type Quality = { score: string; loss: number; rtt_ms: number; jitter_ms: number };
export type Frame = {
  type: string;
  pc?: string;
  sdp?: string;
  member?: string;
  ice_servers?: RTCIceServer[];
  tracks?: TrackDesc[];
  members?: Record<string, Quality>;
  track?: string;
  layer?: string;
  code?: string;
  message?: string;
  alternatives?: Alternative[]; // over_capacity in a cluster: nodes with room; welcome, nodes: where to rejoin
};

export type Remote = { stream: MediaStream; member: string; source: string };
// RemoteStats is what a page decoded of one remote member: video frames,
// audio energy, losses, and the codecs its tracks arrive in (audio/opus).
export type RemoteStats = { framesDecoded: number; audioEnergy: number; packetsLost: number; codecs: string[] };

// SentStats is one RTP stream the page sends: its SSRC, kind, codec, the
// packets it sent, those the node's receiver reports say it lost, and of
// a video layer its RID and frame size.
export type SentStats = { ssrc: number; kind: string; mime: string; packetsSent: number; lost: number; rid?: string; width?: number; height?: number };

export type RTCEvents = {
  remotes(r: Map<string, Remote>): void;
  quality(q: Record<string, Quality>): void;
  error(code: string, message: string, alternatives?: Alternative[]): void;
  // closed: the signalling socket closed, with its close code (1006: no
  // close frame, the node is gone).
  closed(reason: string, code: number): void;
};

// streamMember maps a remote stream ID ("<member>-<source>") to its member
// and source using the node's tracks list.
export function describeStreams(tracks: TrackDesc[]): Map<string, { member: string; source: string }> {
  const m = new Map<string, { member: string; source: string }>();
  for (const t of tracks) m.set(t.stream, { member: t.member ?? t.stream, source: t.source });
  return m;
}

export class RTC {
  private ws: WebSocket;
  private pub?: RTCPeerConnection;
  private sub?: RTCPeerConnection;
  private ice: RTCIceServer[] = [];
  private tracks: TrackDesc[] = [];
  private streams = new Map<string, MediaStream>();
  private senders = new Map<string, RTCRtpSender>(); // by source
  private sources: Record<string, string> = {};
  private negotiating = Promise.resolve();
  private queued?: Promise<void>; // a negotiation not yet begun, that later changes join
  private welcomed: Promise<void>;
  private onWelcome?: () => void;
  private told = false; // the node's first tracks frame came
  private waiters: (() => void)[] = []; // until's, woken by tracks frames, answers and the first frame
  private pendingAnswer?: (sdp: string) => void;
  private sctp = false; // the publisher connection has negotiated data channels
  member = '';
  // nodes are where to rejoin if this node goes: the welcome's, then the
  // last "nodes" frame's (move.ts rejoinTarget).
  nodes: Alternative[] = [];
  // Join timing (performance.now()): the signalling socket opened, the
  // welcome came, the subscriber offer came and was answered, the
  // subscriber connection connected (ICE and DTLS), the first remote video
  // packet arrived and its first frame was decoded.
  timing: {
    wsOpen?: number;
    welcome?: number;
    offer?: number;
    answered?: number;
    connected?: number;
    firstPacket?: number;
    firstFrame?: number;
  } = {};

  // moves is how often the member was moved to another node already
  // (move.ts): a member that was is not placed elsewhere again.
  constructor(session: string, token: string, private on: RTCEvents, moves = 0) {
    const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
    const placed = moves > 0 ? `&moves=${moves}` : '';
    this.ws = new WebSocket(`${proto}//${location.host}/api/v1/sessions/${session}/rtc?token=${encodeURIComponent(token)}${placed}`);
    this.ws.onopen = () => {
      this.timing.wsOpen = performance.now();
    };
    let refused: (e: Error) => void = () => {};
    this.welcomed = new Promise((resolve, reject) => {
      this.onWelcome = resolve;
      refused = reject;
    });
    this.welcomed.catch(() => {}); // a caller that never asked is not told
    this.ws.onmessage = (m) => this.handle(JSON.parse(m.data));
    this.ws.onclose = (e) => {
      refused(new Error('the node refused the connection'));
      on.closed(e.reason || 'the connection to the node closed', e.code);
    };
  }

  // ready resolves when the node welcomed the member, and rejects if the
  // socket closed before.
  ready(): Promise<void> {
    return this.welcomed;
  }

  // subscribed resolves once the subscriber connection is negotiated: the
  // first offer answered, or at once if the node's first tracks frame
  // lists nothing to receive; after at most max ms. The room publishes
  // then: the page's first offer, while the node's waits, would hold up
  // the others' media on the browser's one signalling thread
  // (web/bench/jointime.mjs).
  subscribed(max: number): Promise<void> {
    return this.until(() => this.timing.answered !== undefined || (this.told && this.tracks.length === 0), max);
  }

  // videoWait resolves once the member sees the others' video (the first
  // remote frame decoded), at once if the node's first tracks frame lists
  // no video, and after at most max ms. The room sends its camera then:
  // encoding it while the first remote frames are on their way, on a
  // small machine, delays them (web/bench/jointime.mjs), and the others
  // see the camera a fraction of a second later. The microphone is sent
  // at once.
  videoWait(max: number): Promise<void> {
    return this.until(() => !!this.timing.firstFrame || (this.told && !this.tracks.some((x) => x.kind === 'video')), max);
  }

  // until resolves when cond holds (checked now and on each wake), or
  // after max ms.
  private until(cond: () => boolean, max: number): Promise<void> {
    return new Promise((resolve) => {
      let done = false;
      const finish = () => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(finish, max);
      const check = () => {
        if (done) return;
        if (cond()) finish();
        else this.waiters.push(check);
      };
      check();
    });
  }

  private wake() {
    const w = this.waiters;
    this.waiters = [];
    w.forEach((f) => f());
  }

  // watchFirstFrame notes when the first remote video packet arrives (the
  // track unmutes) and when its first frame is decoded (a video element
  // playing it has its first frame): events, not polling, so that the
  // page spends nothing on it while it joins.
  private watchFirstFrame(track: MediaStreamTrack) {
    if (track.kind !== 'video' || this.timing.firstFrame) return;
    const packet = () => (this.timing.firstPacket ??= performance.now());
    if (!track.muted) packet();
    else track.addEventListener('unmute', packet, { once: true });
    const el = document.createElement('video');
    el.muted = true;
    el.srcObject = new MediaStream([track]);
    const done = () => {
      this.timing.firstFrame ??= performance.now();
      el.srcObject = null;
      this.wake();
    };
    el.addEventListener('loadeddata', done, { once: true });
    el.play().catch(() => {});
  }

  private send(f: Record<string, unknown>) {
    if (this.ws.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(f));
  }

  private async handle(f: Frame) {
    switch (f.type) {
      case 'welcome':
        this.timing.welcome ??= performance.now();
        this.ice = f.ice_servers ?? [];
        this.member = f.member ?? '';
        this.nodes = f.alternatives ?? [];
        this.onWelcome?.();
        break;
      case 'nodes':
        this.nodes = f.alternatives ?? [];
        break;
      case 'offer':
        await this.answerSub(f.sdp ?? '');
        break;
      case 'answer':
        this.pendingAnswer?.(f.sdp ?? '');
        break;
      case 'tracks':
        this.tracks = f.tracks ?? [];
        this.told = true;
        this.wake();
        this.emitRemotes();
        break;
      case 'quality':
        this.on.quality(f.members ?? {});
        break;
      case 'error':
        this.on.error(f.code ?? 'error', f.message ?? '', f.alternatives);
        break;
    }
  }

  private subPC(): RTCPeerConnection {
    if (this.sub) return this.sub;
    const pc = new RTCPeerConnection({ iceServers: this.ice });
    pc.ontrack = (e) => {
      const id = e.streams[0]?.id ?? e.track.id;
      let s = this.streams.get(id);
      if (!s) {
        s = new MediaStream();
        this.streams.set(id, s);
      }
      s.addTrack(e.track);
      this.watchFirstFrame(e.track);
      e.track.onended = () => s!.removeTrack(e.track);
      this.emitRemotes();
    };
    pc.onconnectionstatechange = () => {
      if (pc.connectionState === 'connected') this.timing.connected ??= performance.now();
    };
    this.sub = pc;
    return pc;
  }

  private async answerSub(sdp: string) {
    this.timing.offer ??= performance.now();
    const pc = this.subPC();
    await pc.setRemoteDescription({ type: 'offer', sdp });
    await pc.setLocalDescription(await pc.createAnswer());
    this.send({ type: 'answer', pc: 'sub', sdp: pc.localDescription!.sdp });
    this.timing.answered ??= performance.now();
    this.wake();
  }

  private emitRemotes() {
    const desc = describeStreams(this.tracks);
    const out = new Map<string, Remote>();
    for (const [id, d] of desc) {
      const s = this.streams.get(id) ?? new MediaStream();
      this.streams.set(id, s);
      // Drop tracks of streams the node no longer sends.
      out.set(id, { stream: s, member: d.member, source: d.source });
    }
    this.on.remotes(out);
  }

  // publish sends (or replaces, or with null stops) the track of a source.
  async publish(source: 'microphone' | 'camera' | 'screen', track: MediaStreamTrack | null) {
    const old = this.senders.get(source);
    if (old && track) {
      await old.replaceTrack(track);
      return;
    }
    if (!track && !old) return;
    const pc = this.pubPC();
    if (track) {
      const init: RTCRtpTransceiverInit = { direction: 'sendonly' };
      if (source === 'camera' && track.kind === 'video') {
        init.sendEncodings = simulcastLayers(track.getSettings().height ?? 720);
      }
      const tr = pc.addTransceiver(track, init);
      this.senders.set(source, tr.sender);
      (tr as any)._source = source;
    } else if (old) {
      pc.removeTrack(old);
      this.senders.delete(source);
    }
    await this.negotiate();
  }

  // conversationChannel opens the "conversation" data channel on the
  // publisher connection (the node takes one per member): reliable and
  // unordered, since the conversation orders its messages itself. The
  // first one adds the connection's SCTP section, so it renegotiates.
  conversationChannel(): RTCDataChannel {
    const pc = this.pubPC();
    const dc = pc.createDataChannel('conversation', { ordered: false });
    if (!this.sctp) {
      this.sctp = true;
      this.negotiate().catch((e) => this.on.error('negotiation', String(e)));
    }
    return dc;
  }

  private pubPC(): RTCPeerConnection {
    if (this.pub) return this.pub;
    this.pub = new RTCPeerConnection({ iceServers: this.ice });
    return this.pub;
  }

  // negotiate offers the publisher connection's current transceivers and
  // channels. Changes made before a queued negotiation begins (a
  // microphone, a camera and the conversation channel at join) share it:
  // one offer, not one each.
  private negotiate(): Promise<void> {
    if (this.queued) return this.queued;
    const run = this.negotiating.then(async () => {
      await new Promise((r) => setTimeout(r, 0)); // let the caller's other changes join
      this.queued = undefined;
      const pc = this.pubPC();
      const offer = await pc.createOffer();
      await pc.setLocalDescription(offer);
      this.sources = {};
      for (const t of pc.getTransceivers()) {
        const src = (t as any)._source;
        if (t.mid && src) this.sources[t.mid] = src;
      }
      const answer = new Promise<string>((r) => (this.pendingAnswer = r));
      this.send({ type: 'offer', pc: 'pub', sdp: pc.localDescription!.sdp, sources: this.sources });
      await pc.setRemoteDescription({ type: 'answer', sdp: await answer });
    });
    this.queued = run;
    this.negotiating = run.catch(() => {});
    return run;
  }

  mute(kind: 'audio' | 'video', muted: boolean) {
    this.send({ type: 'mute', kind, muted });
  }

  setLayer(track: string, layer: 'low' | 'mid' | 'high' | 'auto') {
    this.send({ type: 'layer', track, layer });
  }

  // stats reports, per remote member, decoded video frames and audio energy
  // (for the connection panel and the tests).
  async stats(): Promise<Record<string, RemoteStats>> {
    const out: Record<string, RemoteStats> = {};
    if (!this.sub) return out;
    const desc = describeStreams(this.tracks);
    for (const r of this.sub.getReceivers()) {
      const sid = [...this.streams.entries()].find(([, s]) => s.getTracks().includes(r.track))?.[0];
      const member = sid ? (desc.get(sid)?.member ?? sid) : '';
      if (!member) continue;
      const o = (out[member] ??= { framesDecoded: 0, audioEnergy: 0, packetsLost: 0, codecs: [] });
      const report = await r.getStats();
      report.forEach((s: any) => {
        if (s.type !== 'inbound-rtp') return;
        o.framesDecoded += s.framesDecoded ?? 0;
        o.audioEnergy += s.totalAudioEnergy ?? 0;
        o.packetsLost += s.packetsLost ?? 0;
        const mime = s.codecId ? report.get(s.codecId)?.mimeType : undefined;
        if (mime && !o.codecs.includes(mime)) o.codecs.push(mime);
      });
    }
    return out;
  }

  async sent(): Promise<SentStats[]> {
    if (!this.pub) return [];
    const report = await this.pub.getStats();
    const out: SentStats[] = [];
    report.forEach((s: any) => {
      if (s.type !== 'outbound-rtp') return;
      let lost = 0;
      report.forEach((r: any) => {
        if (r.type === 'remote-inbound-rtp' && r.ssrc === s.ssrc) lost = r.packetsLost ?? 0;
      });
      const mime = s.codecId ? (report.get(s.codecId)?.mimeType ?? '') : '';
      out.push({ ssrc: s.ssrc, kind: s.kind, mime, packetsSent: s.packetsSent ?? 0, lost, rid: s.rid, width: s.frameWidth, height: s.frameHeight });
    });
    return out;
  }

  close() {
    this.send({ type: 'leave' });
    this.pub?.close();
    this.sub?.close();
    this.ws.close();
  }
}
