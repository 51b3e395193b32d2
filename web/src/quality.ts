import type { Quality } from './rtc';

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
