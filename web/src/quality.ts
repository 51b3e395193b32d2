import type { Quality } from './rtc';
import type { LinkQuality, SessionLink } from './api';

// qualityLabel turns a member's quality report into a short text.
export function qualityLabel(q?: Quality): string {
  if (!q) return 'no report yet';
  const parts = [q.score];
  if (q.loss > 0) parts.push(`${(q.loss * 100).toFixed(1)}% loss`);
  if (q.rtt_ms > 0) parts.push(`${Math.round(q.rtt_ms)} ms`);
  return parts.join(', ');
}

// myRequest finds the caller's latest request in a floor's queue or
// holders, and its queue position.
export function myRequest(queue: { member: string; status: string; position?: number; id: string }[], member: string) {
  return queue.find((r) => r.member === member);
}

// rtpQuality picks, per member, the worst quality of its plain RTP links
// (by fraction lost) from a session's links.
export function rtpQuality(links: SessionLink[] = []): Record<string, LinkQuality> {
  const out: Record<string, LinkQuality> = {};
  for (const l of links) {
    const q = l.stats?.quality;
    if (l.type !== 'rtp' || !l.member || !q) continue;
    if (!out[l.member] || q.fraction_lost > out[l.member].fraction_lost) out[l.member] = q;
  }
  return out;
}

// rtpQualityLabel says what a member's RTP endpoint reports: loss,
// jitter and, when measured, the round trip to the node.
export function rtpQualityLabel(q: LinkQuality): string {
  const parts = [`RTP ${(q.fraction_lost * 100).toFixed(1)}% loss`, `jitter ${Math.round(q.jitter_seconds * 1000)} ms`];
  if (q.rtt_seconds > 0) parts.push(`${Math.round(q.rtt_seconds * 1000)} ms`);
  return parts.join(', ');
}
