import { describe, expect, it } from 'vitest';
import { NotesRegister, decodeNotes, encodeNotes, wins, type NotesVersion } from '../src/notes';

function permutations<T>(xs: T[]): T[][] {
  if (xs.length <= 1) return [xs];
  return xs.flatMap((x, i) => permutations([...xs.slice(0, i), ...xs.slice(i + 1)]).map((p) => [x, ...p]));
}

// edit is an update made by a member that had applied base, at its clock now.
function edit(base: NotesRegister, sender: number, seq: number, now: number, text: string): NotesVersion {
  return { t: base.stamp(now), sender, seq, text };
}

describe('shared notes: a last-writer-wins register', () => {
  // Ada (1) writes at 1000; Bob (2) saw it and edits on a clock 600 ms
  // behind; Cy (3) edits concurrently with both at 1200; Dee (4) edits
  // concurrently with Ada only, at the same time as Ada.
  const ada: NotesVersion = { t: 1000, sender: 1, seq: 1, text: 'ada' };
  const sawAda = new NotesRegister();
  sawAda.apply(ada);
  const bob = edit(sawAda, 2, 1, 400, 'ada + bob');
  const cy = edit(new NotesRegister(), 3, 1, 1200, 'cy');
  const dee = edit(new NotesRegister(), 4, 1, 1000, 'dee');
  const all = [ada, bob, cy, dee];

  it('an update causally after another wins, even from a clock behind', () => {
    expect(bob.t).toBeGreaterThan(ada.t);
    expect(wins(bob, ada)).toBe(true);
    expect(wins(ada, bob)).toBe(false);
  });

  it('among concurrent updates the greater (t, sender) wins', () => {
    expect(wins(cy, bob)).toBe(true); // 1200 > 1001
    expect(wins(dee, ada)).toBe(true); // same t, sender 4 > 1
    expect(wins(ada, dee)).toBe(false);
  });

  it('every delivery order ends with the same text', () => {
    const ends = new Set<string>();
    for (const order of permutations(all)) {
      const r = new NotesRegister();
      for (const v of order) r.apply(v);
      ends.add(r.text);
    }
    expect([...ends]).toEqual(['cy']);
  });

  it('every order converges with repeats (a hello history after live delivery)', () => {
    const ends = new Set<string>();
    for (const order of permutations([ada, bob, cy, dee, bob, ada])) {
      const r = new NotesRegister();
      for (const v of order) r.apply(v);
      ends.add(r.text);
    }
    expect(ends.size).toBe(1);
  });

  it("a member's own later edit replaces its earlier one", () => {
    const r = new NotesRegister();
    r.apply(cy);
    const again = edit(r, 3, 2, 1200, 'cy, again'); // same clock reading
    expect(again.t).toBe(1201);
    r.apply(again);
    r.apply(cy); // the older one, late
    expect(r.text).toBe('cy, again');
  });

  it('the payload round-trips, and malformed ones are refused', () => {
    expect(decodeNotes(encodeNotes(1234, 'héllo\n"x"'))).toEqual({ t: 1234, text: 'héllo\n"x"' });
    const bad = (s: string) => decodeNotes(new TextEncoder().encode(s));
    expect(bad('nope')).toBeUndefined();
    expect(bad('{"t":-1,"text":"x"}')).toBeUndefined();
    expect(bad('{"t":1.5,"text":"x"}')).toBeUndefined();
    expect(bad('{"t":1,"text":7}')).toBeUndefined();
    expect(bad('null')).toBeUndefined();
  });
});
