import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import {
  callPhone,
  floorAction,
  getBroadcast,
  getSession,
  issueViewToken,
  leaveSession,
  listFloors,
  listMembers,
  listSessionRecordings,
  setFloorStyle,
  startBroadcast,
  startRecording,
  stopBroadcast,
  stopRecording,
  type Broadcast,
  type Floor,
  type LinkQuality,
  type Member,
  type Recording,
} from '../api';
import { Chat, type ChatLine } from '../chat';
import { decodeOp, decodePointer, encodeOp, encodePointer, type BoardOp } from '../board';
import { FLOW_BOARD, FLOW_NOTES, FLOW_POINTER } from '../chat';
import { ChatPanel } from '../components/ChatPanel';
import { NotesPanel } from '../components/NotesPanel';
import { Whiteboard, type OtherPointer } from '../components/Whiteboard';
import { NOTES_MAX, NotesRegister, decodeNotes, encodeNotes } from '../notes';
import { BroadcastPanel } from '../components/BroadcastPanel';
import { FloorPanel } from '../components/FloorPanel';
import { Icon } from '../components/Icon';
import { Thumb } from '../components/Thumb';
import { Tile } from '../components/Tile';
import { EventStream, type SessionEvent } from '../events';
import { openLocal, takeOver } from '../media';
import { qualityLabel, rtpQuality, rtpQualityLabel } from '../quality';
import { RTC, type Quality, type Remote } from '../rtc';
import type { TransportKind } from '../transport';
import { navigate, watchLink } from '../route';
import { VIEWER_LINK_TTL } from '../broadcast';
import { firstAnswering, moveLink, moveTarget, refusedMessage, rejoinTargets } from '../move';

// Another member's pointer goes away after this long without moving.
const POINTER_IDLE_MS = 4000;

type Pointer = OtherPointer & { at: number; member?: string };

declare global {
  interface Window {
    convene?: unknown;
  }
}

// Room: the meeting. Media over two peer connections (rtc.ts), everything
// else from the session's event stream.
export function Room({ session }: { session: string }) {
  const token = sessionStorage.getItem('convene.token.' + session) ?? '';
  const me = sessionStorage.getItem('convene.member.' + session) ?? '';
  const creds = { token };
  const [members, setMembers] = useState<Member[]>([]);
  const [floors, setFloors] = useState<Floor[]>([]);
  const [remotes, setRemotes] = useState<Map<string, Remote>>(new Map());
  const [muted, setMuted] = useState<Record<string, boolean>>({});
  const [camOff, setCamOff] = useState<Record<string, boolean>>({});
  const [speakers, setSpeakers] = useState<string[]>([]);
  const [quality, setQuality] = useState<Record<string, Quality>>({});
  // The members' plain RTP links' quality (phones, RTP tools), polled.
  const [rtpQ, setRtpQ] = useState<Record<string, LinkQuality>>({});
  const [local, setLocal] = useState<MediaStream>();
  const [mic, setMic] = useState(true);
  const [camera, setCamera] = useState(true);
  const [screen, setScreen] = useState<MediaStream>();
  const [online, setOnline] = useState(true);
  const [err, setErr] = useState('');
  const [busy, setBusy] = useState(''); // the node sheds video: load.shed
  const [callUser, setCallUser] = useState('');
  const [callMsg, setCallMsg] = useState('');
  const [ended, setEnded] = useState('');
  const [recording, setRecording] = useState<Recording>(); // the session's running recording
  const [broadcast, setBroadcast] = useState<Broadcast>(); // the session's running HLS broadcast
  const [lines, setLines] = useState<ChatLine[]>([]);
  const [chatReady, setChatReady] = useState(false);
  const [chatTransport, setChatTransport] = useState<TransportKind>();
  const [ops, setOps] = useState<BoardOp[]>([]);
  const [drawers, setDrawers] = useState<string[]>([]);
  const [board, setBoard] = useState(false);
  const [pointers, setPointers] = useState<Map<number, Pointer>>(new Map());
  const [notes, setNotes] = useState<{ text: string; by?: string }>({ text: '' });
  const notesReg = useRef(new NotesRegister());
  const rtc = useRef<RTC>();
  const events = useRef<EventStream>();
  const chat = useRef<Chat>();

  const names = useMemo(() => Object.fromEntries(members.map((m) => [m.id, m.name])), [members]);
  const meMember = members.find((m) => m.id === me);
  const dataFloor = floors.find((f) => f.name === 'data');
  const mayDraw = !dataFloor || dataFloor.style === 'none' || dataFloor.tokens.some((t) => t.holder === me);
  const chair = meMember?.role === 'chair';

  const refreshFloors = () => listFloors(creds, session).then(setFloors, () => {});
  const refreshMembers = () => listMembers(creds, session).then(setMembers, () => {});
  const refreshBroadcast = () => getBroadcast(creds, session).then(setBroadcast, () => {});
  const refreshRecording = () =>
    listSessionRecordings(creds, session).then((rs) => setRecording(rs.find((r) => r.state === 'recording')), () => {});

  useEffect(() => {
    if (!token) return;
    const poll = () => getSession(creds, session).then((s) => setRtpQ(rtpQuality(s.links)), () => {});
    poll();
    const t = setInterval(poll, 5000);
    return () => clearInterval(t);
  }, [token, session]);

  useEffect(() => {
    if (!token) return;
    refreshMembers();
    refreshFloors();
    refreshRecording();
    refreshBroadcast();
    const onEvent = (ev: SessionEvent) => {
      const d = ev.data ?? {};
      switch (ev.type) {
        case 'member.joined':
        case 'member.updated':
        case 'member.left':
          refreshMembers();
          if (ev.type === 'member.left' && d.id === me) setEnded('You have left the session.');
          break;
        case 'floor.request':
        case 'floor.style':
          refreshFloors();
          break;
        case 'media.muted':
          (d.kind === 'audio' ? setMuted : setCamOff)((m) => ({ ...m, [d.member]: d.muted }));
          break;
        case 'speaker.active':
          setSpeakers(d.members ?? []);
          break;
        case 'recording.started':
        case 'recording.stopped':
        case 'recording.moved':
          refreshRecording();
          break;
        case 'hls.started':
        case 'hls.moved': // its node died: another node runs it now, under the same paths
          setBroadcast(d as Broadcast);
          break;
        case 'hls.stopped':
          setBroadcast(undefined);
          break;
        case 'load.shed':
          setBusy(d.level > 0 ? (d.message ?? 'Video paused: server busy') : '');
          break;
        case 'finished':
        case 'deactivated':
        case 'canceled':
          setEnded('The session has ended.');
          break;
      }
    };
    const es = new EventStream(session, token, onEvent, setOnline);
    events.current = es;
    return () => es.close();
  }, [session, token]);

  useEffect(() => {
    if (!token) return;
    let stop = false;
    const moved = Number(sessionStorage.getItem('convene.moves.' + session) ?? '0');
    const r = new RTC(session, token, {
      remotes: setRemotes,
      quality: setQuality,
      error: (code, msg, alts) => {
        if (code !== 'over_capacity' && code !== 'moved') return setErr(`${code}: ${msg}`);
        // Over capacity, or the session meets on another node (placed
        // there: near, with room): move to it, if it takes our token.
        const moves = Number(sessionStorage.getItem('convene.moves.' + session) ?? '0');
        const to = moveTarget(alts, moves);
        if (!to) return setErr(code === 'moved' ? `${code}: ${msg}` : refusedMessage(msg, alts, moves));
        setErr(code === 'moved' ? `This meeting is on ${to.node}: moving you there…` : `This server is busy: moving you to ${to.node}…`);
        stop = true;
        location.assign(moveLink(to, session, me, token, moves));
      },
      closed: (why, code) => {
        if (stop) return;
        // The node went (killed, cut off): rejoin on another node of the
        // cluster that answers, as the same member, with the same token
        // (issue 16).
        const targets = rejoinTargets(r.nodes, code);
        if (targets.length === 0) return setEnded((e) => e || 'Disconnected: ' + why);
        stop = true;
        setErr('Lost this server: looking for another…');
        firstAnswering(targets).then((to) => {
          if (!to) return setEnded('Disconnected: this server went, and no other server of the meeting answers');
          setErr(`Lost this server: rejoining on ${to.node}…`);
          const moves = Number(sessionStorage.getItem('convene.moves.' + session) ?? '0');
          location.assign(moveLink(to, session, me, token, moves));
        });
      },
    }, moved);
    rtc.current = r;
    // The chat moves onto a data channel of the meeting's connection once
    // the node welcomed us and the others' media is negotiated; until
    // then, and if it fails, the WebSocket.
    r.ready()
      .then(() => r.subscribed(1000))
      .then(
        () => !stop && chat.current?.useChannel(r.conversationChannel()),
        () => {},
      );
    const handed = takeOver();
    (async () => {
      try {
        const s = handed.local ?? (await openLocal(handed.choice?.audioId, handed.choice?.videoId, handed.choice?.camera ?? true));
        if (stop) return s.getTracks().forEach((t) => t.stop());
        setLocal(s);
        await r.ready();
        await r.subscribed(1000); // the others' media first (rtc.ts)
        const a = s.getAudioTracks()[0];
        const v = s.getVideoTracks()[0];
        // The microphone in one offer with the conversation channel
        // (opened then too; rtc.ts negotiate); the camera once
        // the others' video shows, or at most 1 s on (rtc.ts videoWait).
        const sent: Promise<void>[] = [];
        if (a) {
          a.enabled = handed.choice?.mic ?? true;
          setMic(a.enabled);
          sent.push(r.publish('microphone', a));
          if (!a.enabled) r.mute('audio', true);
        }
        if (v) sent.push(r.videoWait(1000).then(() => (stop ? undefined : r.publish('camera', v))));
        else setCamera(false);
        await Promise.all(sent);
      } catch (e: any) {
        setErr(e.message ?? String(e));
      }
    })();
    window.convene = {
      member: me,
      stats: () => r.stats(),
      sent: () => r.sent(),
      timing: () => r.timing,
      pauseEvents: () => events.current?.pause(),
      resumeEvents: () => events.current?.resume(),
      remotes: () => [...rtcRemotes.current.values()].map((x) => ({ member: x.member, source: x.source })),
    };
    return () => {
      stop = true;
      r.close();
    };
  }, [session, token]);

  useEffect(() => {
    if (!token) return;
    const c = new Chat(session, token, {
      line: (l) => setLines((ls) => [...ls.slice(-499), l]),
      board: (from, payload) => {
        const op = decodeOp(payload);
        if (!op) return;
        setOps((os) => (op.t === 'c' ? [op] : [...os.slice(-19_999), op]));
        const who = c.name(from);
        setDrawers((ds) => (ds.includes(who) ? ds : [...ds, who]));
      },
      pointer: (from, payload) => {
        const p = decodePointer(payload);
        if (!p || from === c.self) return;
        setPointers((ps) => {
          const n = new Map(ps);
          if ('gone' in p) n.delete(from);
          else n.set(from, { key: from, name: c.name(from), x: p.x, y: p.y, at: Date.now(), member: c.memberId(from) });
          return n;
        });
      },
      notes: (from, seq, payload) => {
        const d = decodeNotes(payload);
        if (d && notesReg.current.apply({ t: d.t, sender: from, seq, text: d.text }))
          setNotes({ text: d.text, by: from === c.self ? undefined : c.name(from) });
      },
      state: setChatReady,
      transport: setChatTransport,
      error: (m) => setErr('Chat: ' + m),
    });
    chat.current = c;
    return () => c.close();
  }, [session, token]);

  // Pointers that stopped moving go away.
  useEffect(() => {
    if (pointers.size === 0) return;
    const t = setInterval(() => {
      const old = Date.now() - POINTER_IDLE_MS;
      setPointers((ps) => ([...ps.values()].some((p) => p.at < old) ? new Map([...ps].filter(([, p]) => p.at >= old)) : ps));
    }, 1000);
    return () => clearInterval(t);
  }, [pointers.size > 0]);
  // A member who left takes its pointer along.
  const shownPointers = [...pointers.values()].filter((p) => !p.member || members.length === 0 || members.some((m) => m.id === p.member));

  // saveNotes shares the notes; it says why not if it could not.
  const saveNotes = (text: string): string => {
    const c = chat.current;
    if (!c?.ready) return 'Not shared: not connected. Edit again to retry.';
    const body = encodeNotes(notesReg.current.stamp(Date.now()), text);
    if (body.length > NOTES_MAX || !c.fits(body.length))
      return `Not shared: the notes are too long (${Math.ceil(body.length / 1024)} KiB, at most ${NOTES_MAX / 1024} KiB). Shorten them; the others keep the last shared version.`;
    return c.send(body, FLOW_NOTES) ? '' : 'Not shared: not connected. Edit again to retry.';
  };

  const rtcRemotes = useRef(remotes);
  rtcRemotes.current = remotes;

  useEffect(() => () => local?.getTracks().forEach((t) => t.stop()), [local]);

  const toggleMic = () => {
    const a = local?.getAudioTracks()[0];
    const on = !mic;
    if (a) a.enabled = on;
    setMic(on);
    setMuted((m) => ({ ...m, [me]: !on }));
    rtc.current?.mute('audio', !on);
  };
  const toggleCamera = () => {
    const v = local?.getVideoTracks()[0];
    const on = !camera;
    if (v) v.enabled = on;
    setCamera(on);
    setCamOff((m) => ({ ...m, [me]: !on }));
    rtc.current?.mute('video', !on);
  };
  const toggleScreen = async () => {
    if (screen) {
      screen.getTracks().forEach((t) => t.stop());
      setScreen(undefined);
      await rtc.current?.publish('screen', null);
      return;
    }
    try {
      const s = await navigator.mediaDevices.getDisplayMedia({ video: true });
      const t = s.getVideoTracks()[0];
      t.onended = () => {
        setScreen(undefined);
        rtc.current?.publish('screen', null);
      };
      setScreen(s);
      await rtc.current?.publish('screen', t);
    } catch (e: any) {
      setErr('Screen sharing: ' + e.message);
    }
  };
  const leave = async () => {
    rtc.current?.close();
    await leaveSession(creds, session, me).catch(() => {});
    sessionStorage.removeItem('convene.token.' + session);
    navigate('/');
  };
  const callIn = () => {
    const user = callUser.trim();
    if (!user) return;
    callPhone(creds, session, user).then(
      () => {
        setCallMsg(`Ringing ${user}…`);
        setCallUser('');
      },
      (e) => setCallMsg(`Could not call ${user}: ${e.message}`),
    );
  };
  const toggleRecording = () =>
    (recording ? stopRecording(creds, recording.id) : startRecording(creds, session, `Meeting of ${new Date().toLocaleString()}`)).then(
      refreshRecording,
      (e) => setErr('Recording: ' + e.message),
    );
  const broadcastStart = (video: 'speaker' | 'composite') => startBroadcast(creds, session, video).then(setBroadcast);
  const broadcastStop = () =>
    stopBroadcast(creds, session).then(
      () => setBroadcast(undefined),
      (e) => {
        refreshBroadcast();
        throw e;
      },
    );
  const viewerLink = () =>
    issueViewToken(creds, session, VIEWER_LINK_TTL).then((t) => watchLink(location.origin, session, t.token));
  const act = (floor: string, action: string, body: Record<string, unknown> = {}) =>
    floorAction(creds, session, floor, action, body).then(refreshFloors, (e) => setErr(e.message));
  const style = (floor: string, s: string, auto: boolean) =>
    setFloorStyle(creds, session, floor, s, auto).then(refreshFloors, (e) => setErr(e.message));

  if (!token) {
    return (
      <main class="narrow">
        <h1>Not joined</h1>
        <p>Open the session's join link to take part.</p>
      </main>
    );
  }
  if (ended) {
    return (
      <main class="narrow">
        <h1>{ended}</h1>
        <button onClick={() => navigate('/')}>Home</button>
      </main>
    );
  }
  const tiles = [...remotes.entries()];
  return (
    <div class="room">
      <main class="stage" aria-label="Participants">
        <div class={'grid n' + Math.min(tiles.length + 1, 9)}>
          <Tile stream={local} name={meMember?.name ?? 'You'} local muted={!mic} cameraOff={!camera} speaking={speakers.includes(me)} testid="tile-me" />
          {screen && <Tile stream={screen} name={meMember?.name ?? 'You'} local source="screen" />}
          {tiles.map(([id, r]) => (
            <Tile
              key={id}
              stream={r.stream}
              name={names[r.member] ?? r.member}
              source={r.source}
              muted={r.source !== 'screen' && muted[r.member]}
              cameraOff={r.source !== 'screen' && camOff[r.member]}
              speaking={speakers.includes(r.member)}
              quality={r.source === 'screen' ? undefined : quality[r.member]?.score}
              testid={'tile-' + r.member}
            />
          ))}
        </div>
        <nav class="controls" aria-label="Call controls">
          <button class={mic ? '' : 'off'} onClick={toggleMic} aria-label={mic ? 'Mute microphone' : 'Unmute microphone'}>
            <Icon name={mic ? 'mic' : 'micOff'} /> {mic ? 'Mute' : 'Unmute'}
          </button>
          <button class={camera ? '' : 'off'} onClick={toggleCamera} aria-label={camera ? 'Turn camera off' : 'Turn camera on'}>
            <Icon name={camera ? 'cam' : 'camOff'} /> {camera ? 'Stop video' : 'Start video'}
          </button>
          <button class={screen ? 'off' : ''} onClick={toggleScreen} aria-label={screen ? 'Stop sharing the screen' : 'Share the screen'}>
            <Icon name="screen" /> {screen ? 'Stop sharing' : 'Share screen'}
          </button>
          <button class={board ? 'off' : ''} onClick={() => setBoard(!board)} aria-pressed={board} aria-label={board ? 'Hide the whiteboard' : 'Show the whiteboard'}>
            <Icon name="board" /> Whiteboard{ops.length > 0 && !board ? ' •' : ''}
          </button>
          {chair && (
            <button class={recording ? 'off' : ''} onClick={toggleRecording} aria-label={recording ? 'Stop recording the session' : 'Record the session'}>
              <Icon name="rec" /> {recording ? 'Stop recording' : 'Record'}
            </button>
          )}
          {recording && (
            <span class="rec-badge" role="status">
              ● Recording
            </span>
          )}
          {broadcast && (
            <span class="live-badge" role="status" data-testid="live-badge" title="The session is broadcast to viewers">
              ● Live
            </span>
          )}
          <button class="danger" onClick={leave} aria-label="Leave the session">
            <Icon name="leave" /> Leave
          </button>
        </nav>
        {board && (
          <Whiteboard
            ops={ops}
            mayDraw={mayDraw}
            who={drawers}
            send={(op) => chat.current?.send(encodeOp(op), FLOW_BOARD) ?? false}
            pointers={shownPointers}
            point={(p) => chat.current?.send(encodePointer(p), FLOW_POINTER)}
          />
        )}
        {!online && <p class="banner" role="status">Reconnecting to the event stream…</p>}
        {busy && <p class="banner" role="status">{busy}</p>}
        {err && (
          <p class="error" role="alert">
            {err} <button class="quiet" onClick={() => setErr('')} aria-label="Dismiss the error">✕</button>
          </p>
        )}
      </main>
      <aside class="side">
        {chair && <BroadcastPanel live={broadcast} start={broadcastStart} stop={broadcastStop} viewerLink={viewerLink} />}
        <FloorPanel floors={floors} me={me} chair={chair} names={names} act={act} style={style} />
        <section class="panel" aria-labelledby="members-h">
          <h2 id="members-h">Members ({members.length})</h2>
          <ul class="members">
            {members.map((m) => (
              <li key={m.id} data-testid={'member-' + m.name}>
                {m.id !== me && <Thumb creds={creds} session={session} member={m.id} name={m.name} />}
                <span class="name">{m.name}</span> <span class="role">{m.role}</span>
                {m.subgroup && <span class="muted"> · {m.subgroup}</span>}
                {muted[m.id] && (
                  <span class="badge-inline" aria-label="muted">
                    <Icon name="micOff" />
                  </span>
                )}
                <span class="muted quality"> · {m.id === me ? 'you' : !quality[m.id] && rtpQ[m.id] ? rtpQualityLabel(rtpQ[m.id]) : qualityLabel(quality[m.id])}</span>
              </li>
            ))}
          </ul>
          {chair && (
            <form
              class="call"
              onSubmit={(e) => {
                e.preventDefault();
                callIn();
              }}
            >
              <label for="call-user">Call a phone in (SIP account)</label>
              <input
                id="call-user"
                value={callUser}
                autocomplete="off"
                onInput={(e) => setCallUser((e.target as HTMLInputElement).value)}
              />
              <button type="submit" disabled={!callUser.trim()}>
                Call
              </button>
              {callMsg && (
                <p role="status" class="muted">
                  {callMsg}
                </p>
              )}
            </form>
          )}
        </section>
        <ChatPanel lines={lines} ready={chatReady} transport={chatTransport} send={(t) => chat.current?.send(t) ?? false} />
        <NotesPanel text={notes.text} by={notes.by} ready={chatReady} save={saveNotes} />
      </aside>
    </div>
  );
}
