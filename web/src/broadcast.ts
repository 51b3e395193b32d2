// What the meeting's broadcast control and the viewer page tell people:
// pure functions of the API's and the player's answers, tested alone.
import { ApiError } from './api';

// VIEWER_LINK_TTL is how long a viewer link a chair copies stays valid:
// the node's signed HLS prefix lasts at most 12 h too.
export const VIEWER_LINK_TTL = 12 * 3600;

// broadcastError says why starting or stopping the broadcast failed, in
// words a chair can act on.
export function broadcastError(e: unknown): string {
  if (!(e instanceof ApiError)) return 'Broadcast: ' + (e instanceof Error ? e.message : String(e));
  switch (e.status) {
    case 503:
      if (e.code === 'hls_busy') return 'The server broadcasts as many sessions as it can. Try again in a minute.';
      if (e.code === 'over_capacity') return 'The server is too busy for a 2×2 composite now. Broadcast the active speaker instead, or try again later.';
      if (/ffmpeg/i.test(e.message)) return 'This server cannot broadcast: ffmpeg is not installed on it.';
      return 'This server does not broadcast sessions.';
    case 429:
      return 'The server runs as many video composites as it may. Broadcast the active speaker instead, or try again later.';
    case 409:
      return 'The session is not active, so it cannot be broadcast.';
    case 403:
      return 'Only a chair can start or stop the broadcast.';
    case 404:
      return 'The broadcast has already stopped.';
  }
  return 'Broadcast: ' + e.message;
}

// ViewerState is what the viewer page shows after a fatal player error,
// and whether (and when) it opens the stream again.
export type ViewerState = { message: string; alert: boolean; retryMs?: number };

// viewerState reads a fatal player error: the HTTP status of the failed
// load (undefined for none), the player's detail, and whether the page
// has played the stream since it opened.
export function viewerState(status: number | undefined, details: string, played: boolean): ViewerState {
  if (status === 401) return { message: 'This link is not valid (any more). Ask for a new viewer link.', alert: true };
  if (status === 404)
    return played
      ? { message: 'The broadcast has ended.', alert: false, retryMs: 5000 }
      : { message: 'Waiting for the broadcast to start…', alert: false, retryMs: 3000 };
  // A broadcast just started: the node holds the first playlist until
  // its first segment is made, and answers 503 if that takes long.
  if (status === 503 && !played) return { message: 'Waiting for the broadcast to start…', alert: false, retryMs: 2000 };
  // The signed prefix expired: the link's token opens a new one.
  if (status === 403) return { message: 'Reconnecting…', alert: false, retryMs: 1000 };
  if (!status) return { message: 'The connection to the server was lost. Retrying…', alert: false, retryMs: 3000 };
  return { message: `The stream stopped (${details}). Retrying…`, alert: false, retryMs: 5000 };
}
