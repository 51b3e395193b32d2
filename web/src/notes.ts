// The session's shared notes (the conversation's notes flow, id 4): one
// text document, each update carrying the whole of it, merged as a
// last-writer-wins register on top of the conversation's Δ-causal
// delivery.
//
// The rule: a receiver applies an update if it is causally after the
// current version; among concurrent updates the greater (t, sender) wins
// (then seq, which only a sender's own updates share t with). t is the
// update's sent time, raised above the t of the version its editor had
// applied (t = max(now, current.t + 1)): so an update causally after
// another always has the greater t, even from a member whose clock is
// behind, and the rule is "the greatest (t, sender, seq) wins" — a
// maximum, so every member ends with the same text whatever order the
// updates and the hello's history came in. (Ordering by the header's sent
// time alone would not converge: an edit made after seeing another, on a
// clock behind it, would lose to it at one member and, if a concurrent
// third came between, win at another.)
//
// The node only stores and forwards; a hello carries each sender's
// newest update, among which is the winner (internal/chat hub.history).
//
// Wire payload: JSON {"t": ms, "text": "…"}.

export type NotesVersion = { t: number; sender: number; seq: number; text: string };

// NOTES_MAX is the most bytes a notes payload takes: the node takes at
// most 16 KiB a message, and the header (sequence numbers, causal
// context) needs the rest.
export const NOTES_MAX = 15 * 1024;

const enc = new TextEncoder();

// encodeNotes is the payload of an update stamped t.
export function encodeNotes(t: number, text: string): Uint8Array {
  return enc.encode(JSON.stringify({ t, text }));
}

// decodeNotes reads a notes payload; undefined for anything malformed.
export function decodeNotes(b: Uint8Array): { t: number; text: string } | undefined {
  try {
    const o = JSON.parse(new TextDecoder().decode(b));
    if (!Number.isSafeInteger(o?.t) || o.t < 0 || typeof o.text !== 'string') return undefined;
    return { t: o.t, text: o.text };
  } catch {
    return undefined;
  }
}

// wins says whether a replaces b.
export function wins(a: NotesVersion, b: NotesVersion | undefined): boolean {
  if (!b) return true;
  if (a.t !== b.t) return a.t > b.t;
  if (a.sender !== b.sender) return a.sender > b.sender;
  return a.seq > b.seq;
}

// NotesRegister is a member's copy of the session's notes.
export class NotesRegister {
  current?: NotesVersion;

  // apply takes a delivered update (or one of the hello's history, or our
  // own); true if it is now the current version.
  apply(v: NotesVersion): boolean {
    if (!wins(v, this.current)) return false;
    this.current = v;
    return true;
  }

  // stamp is the t of an update made now: after the current version.
  stamp(now: number): number {
    return Math.max(Math.floor(now), (this.current?.t ?? 0) + 1);
  }

  get text(): string {
    return this.current?.text ?? '';
  }
}
