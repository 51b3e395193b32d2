// Routes: / (home), /join/<session>#t=<join token>, /s/<session> (in the
// meeting, with the member token kept in sessionStorage; a member another
// node moved here brings it in the fragment, move.ts), /recordings,
// /watch/<session>#t=<token> (a passive viewer of the session's HLS).

import { parseHandoff, type Handoff } from './move';

export type Route =
  | { page: 'home' }
  | { page: 'join'; session: string; joinToken: string }
  | { page: 'room'; session: string; handoff?: Handoff }
  | { page: 'recordings' }
  | { page: 'watch'; session: string; token: string };

export function parseRoute(pathname: string, hash: string): Route {
  const parts = pathname.split('/').filter(Boolean);
  const t = new URLSearchParams(hash.replace(/^#/, '')).get('t') ?? '';
  if (parts[0] === 'join' && parts[1]) return { page: 'join', session: decodeURIComponent(parts[1]), joinToken: t };
  if (parts[0] === 'watch' && parts[1]) return { page: 'watch', session: decodeURIComponent(parts[1]), token: t };
  if (parts[0] === 's' && parts[1]) {
    const handoff = parseHandoff(hash);
    return handoff ? { page: 'room', session: decodeURIComponent(parts[1]), handoff } : { page: 'room', session: decodeURIComponent(parts[1]) };
  }
  if (parts[0] === 'recordings') return { page: 'recordings' };
  return { page: 'home' };
}

export function joinLink(origin: string, session: string, joinToken: string): string {
  return `${origin}/join/${encodeURIComponent(session)}#t=${encodeURIComponent(joinToken)}`;
}

// watchLink is a passive viewer's link: the token (a view token, which
// only plays the broadcast) stays in the fragment, which the browser never
// sends.
export function watchLink(origin: string, session: string, token: string): string {
  return `${origin}/watch/${encodeURIComponent(session)}#t=${encodeURIComponent(token)}`;
}

export function navigate(path: string) {
  history.pushState(null, '', path);
  dispatchEvent(new PopStateEvent('popstate'));
}
