// The REST API under /api/v1: operators send their key (X-API-Key),
// members their token (Authorization: Bearer).

export type Creds = { key?: string; token?: string };

export class ApiError extends Error {
  constructor(
    public status: number,
    public code: string,
    message: string,
  ) {
    super(message);
  }
}

function authHeaders(creds: Creds): Record<string, string> {
  if (creds.key) return { 'X-API-Key': creds.key };
  if (creds.token) return { Authorization: 'Bearer ' + creds.token };
  return {};
}

export async function api<T>(method: string, path: string, creds: Creds, body?: unknown): Promise<T> {
  const headers = authHeaders(creds);
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const resp = await fetch('/api/v1' + path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await resp.text();
  const data = text ? JSON.parse(text) : {};
  if (!resp.ok) {
    const e = data?.error ?? {};
    throw new ApiError(resp.status, e.code ?? 'error', e.message ?? resp.statusText);
  }
  return data as T;
}

// LinkQuality is what a plain RTP endpoint's receiver reports say of the
// streams the node sends it (a link's stats.quality).
export type LinkQuality = { reports: number; fraction_lost: number; cumulative_lost: number; jitter_seconds: number; rtt_seconds: number };
export type SessionLink = { id: string; type: string; member?: string; stats?: { quality?: LinkQuality } };

export type Session = {
  id: string;
  name: string;
  state: string;
  members: number;
  links?: SessionLink[];
  start_at?: string;
  end_at?: string;
  created_at: string;
};

export type Member = { id: string; name: string; role: string; subgroup?: string };

export type FloorRequest = { id: string; floor: string; member: string; status: string; position?: number };
export type FloorToken = { id: string; holder?: string };
export type Floor = { name: string; style: string; auto: boolean; tokens: FloorToken[]; queue: FloorRequest[] };

export const floorStyles = ['none', 'floor_control', 'brainstorming', 'chalkboard', 'discussion_groups', 'activity_sensing'];

// A node of the cluster as the serving node hears its heartbeats
// (GET /nodes); peers is its measured round trip to each other node.
export type PeerDelay = { node: string; rtt_seconds: number; loss: number };
export type ClusterNode = {
  id: string;
  state: string;
  stale: boolean;
  heartbeat: { peers?: PeerDelay[]; rtp_links?: { reporting: number; lossy: number; lossiest?: string[] } };
};
export const listNodes = (c: Creds) => api<{ nodes: ClusterNode[] }>('GET', '/nodes', c).then((r) => r.nodes ?? []);

export const listSessions = (c: Creds) => api<{ sessions: Session[] }>('GET', '/sessions', c).then((r) => r.sessions ?? []);
export const getSession = (c: Creds, id: string) => api<Session>('GET', '/sessions/' + id, c);
export const createSession = (c: Creds, name: string, startAt?: string, endAt?: string) =>
  api<Session>('POST', '/sessions', c, { name, start_at: startAt || undefined, end_at: endAt || undefined });
export const sessionAction = (c: Creds, id: string, action: string) =>
  api<Session>('POST', `/sessions/${id}/state`, c, { action });
export const callPhone = (c: Creds, id: string, user: string) =>
  api<{ call_id: string; state: string }>('POST', `/sessions/${id}/calls`, c, { user });
export const issueToken = (c: Creds, id: string, role: string, opts: { ttl_seconds?: number; max_uses?: number } = {}) =>
  api<{ token: string; id: string; expires_at: string }>('POST', `/sessions/${id}/tokens`, c, { role, ...opts });
// issueViewToken issues a view token: it plays the session's broadcast
// (HLS) and admits its holder to nothing else, not as a member.
export const issueViewToken = (c: Creds, id: string, ttlSeconds: number) =>
  api<{ token: string; id: string; expires_at: string }>('POST', `/sessions/${id}/tokens`, c, { role: 'viewer', ttl_seconds: ttlSeconds });
export const joinSession = (joinToken: string, id: string, name: string) =>
  api<{ member: Member; token: { token: string } }>('POST', `/sessions/${id}/members`, { token: joinToken }, { name });
export const leaveSession = (c: Creds, id: string, member: string) =>
  api<unknown>('DELETE', `/sessions/${id}/members/${member}`, c);
export const listMembers = (c: Creds, id: string) =>
  api<{ members: Member[] }>('GET', `/sessions/${id}/members`, c).then((r) => r.members ?? []);
export const listFloors = (c: Creds, id: string) =>
  api<{ floors: Floor[] }>('GET', `/sessions/${id}/floors`, c).then((r) => r.floors ?? []);
export const floorAction = (c: Creds, id: string, floor: string, action: string, body: Record<string, unknown> = {}) =>
  api<FloorRequest>('POST', `/sessions/${id}/floors/${floor}/${action}`, c, body);
export const setFloorStyle = (c: Creds, id: string, floor: string, style: string, auto: boolean) =>
  api<Floor>('PUT', `/sessions/${id}/floors/${floor}`, c, { style, auto });

// Recordings (issue 15): every stream of a session, kept as rtpdump files.
export type Recording = {
  id: string;
  session: string;
  title: string;
  description: string;
  owner: string;
  state: 'recording' | 'finished' | 'interrupted' | 'failed';
  started_at: string;
  ended_at?: string;
  duration_ms: number;
  size_bytes: number;
  streams: number;
  error?: string;
};
export const listRecordings = (c: Creds, q = '') =>
  api<{ recordings: Recording[] }>('GET', '/recordings' + (q ? '?q=' + encodeURIComponent(q) : ''), c).then((r) => r.recordings ?? []);
export const listSessionRecordings = (c: Creds, id: string) =>
  api<{ recordings: Recording[] }>('GET', `/sessions/${id}/recordings`, c).then((r) => r.recordings ?? []);
export const startRecording = (c: Creds, id: string, title: string) =>
  api<Recording>('POST', `/sessions/${id}/recordings`, c, { title });
export const stopRecording = (c: Creds, rid: string) => api<Recording>('POST', `/recordings/${rid}/stop`, c);
export const updateRecording = (c: Creds, rid: string, title: string, description: string) =>
  api<Recording>('PATCH', `/recordings/${rid}`, c, { title, description });
export const deleteRecording = (c: Creds, rid: string) => api<unknown>('DELETE', `/recordings/${rid}`, c);

// exportRecording fetches a recording as one file a player opens: WebM
// (VP8 and Opus, in sync) or Ogg/Opus or WAV for its audio.
export const exportRecording = (c: Creds, rid: string, format: 'webm' | 'ogg' | 'wav') =>
  fetchBlob(c, `/recordings/${rid}/export?format=${format}`);

// thumbnail fetches the node's newest still of a member's camera (a JPEG
// taken every few seconds); 404 for a member without one.
export const thumbnail = (c: Creds, session: string, member: string) =>
  fetchBlob(c, `/sessions/${session}/tracks/${encodeURIComponent(member)}/thumbnail.jpg`);

async function fetchBlob(c: Creds, path: string): Promise<Blob> {
  const resp = await fetch('/api/v1' + path, { headers: authHeaders(c) });
  if (!resp.ok) {
    const data = await resp.json().catch(() => ({}));
    const e = data?.error ?? {};
    throw new ApiError(resp.status, e.code ?? 'error', e.message ?? resp.statusText);
  }
  return resp.blob();
}

// HLS broadcast (issue 18): a chair (or the operator) starts and stops it;
// every member reads it; viewers open the watch link (route.ts watchLink).
export type Broadcast = { session: string; playlist: string; started_at: string; video_track?: string; restarts: number };
export type BroadcastVideo = 'speaker' | 'composite';
export const startBroadcast = (c: Creds, id: string, video: BroadcastVideo) =>
  api<Broadcast>('POST', `/sessions/${id}/hls`, c, { video });
export const stopBroadcast = (c: Creds, id: string) => api<unknown>('DELETE', `/sessions/${id}/hls`, c);
// getBroadcast is the session's running broadcast, undefined if there is
// none (404) or the node broadcasts nothing (503).
export const getBroadcast = (c: Creds, id: string) =>
  api<Broadcast>('GET', `/sessions/${id}/hls`, c).catch((e) => {
    if (e instanceof ApiError && (e.status === 404 || e.status === 503)) return undefined;
    throw e;
  });
