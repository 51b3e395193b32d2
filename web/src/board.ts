// The shared whiteboard's messages (the conversation's board flow): a
// stroke segment or a clear, as compact JSON. Points are quantized to
// 0..1000 of the board's width and height, so every screen draws the
// same picture.

export type Stroke = { t: 's'; id: string; c: string; w: number; p: number[] }; // p: x1, y1, x2, y2, …
export type Clear = { t: 'c' };
export type BoardOp = Stroke | Clear;

export const COLORS = ['#1f2937', '#dc2626', '#2563eb', '#16a34a'];
const MAX_POINTS = 400; // per message, well under the 16 KiB cap

export function encodeOp(op: BoardOp): Uint8Array {
  return new TextEncoder().encode(JSON.stringify(op));
}

// decodeOp reads a board message; undefined for anything malformed.
export function decodeOp(b: Uint8Array): BoardOp | undefined {
  try {
    const o = JSON.parse(new TextDecoder().decode(b));
    if (o?.t === 'c') return { t: 'c' };
    if (o?.t !== 's' || typeof o.id !== 'string' || !Array.isArray(o.p) || o.p.length < 2 || o.p.length % 2 || o.p.length > 2 * MAX_POINTS) return undefined;
    if (!o.p.every((v: unknown) => Number.isInteger(v) && (v as number) >= 0 && (v as number) <= 1000)) return undefined;
    const c = COLORS.includes(o.c) ? o.c : COLORS[0];
    const w = Math.min(12, Math.max(1, Number(o.w) || 2));
    return { t: 's', id: o.id.slice(0, 40), c, w, p: o.p };
  } catch {
    return undefined;
  }
}

// quantize maps a point on an element of size w×h to 0..1000.
export function quantize(x: number, y: number, w: number, h: number): [number, number] {
  const q = (v: number, s: number) => Math.min(1000, Math.max(0, Math.round((v / s) * 1000)));
  return [q(x, w), q(y, h)];
}

// draw paints ops onto a canvas context of size w×h from scratch.
export function draw(ctx: CanvasRenderingContext2D, ops: BoardOp[], w: number, h: number): void {
  ctx.clearRect(0, 0, w, h);
  let from = 0;
  ops.forEach((op, i) => op.t === 'c' && (from = i + 1));
  ctx.lineCap = 'round';
  ctx.lineJoin = 'round';
  for (const op of ops.slice(from)) {
    if (op.t !== 's') continue;
    ctx.strokeStyle = op.c;
    ctx.lineWidth = op.w;
    ctx.beginPath();
    for (let i = 0; i < op.p.length; i += 2) {
      const x = (op.p[i] / 1000) * w;
      const y = (op.p[i + 1] / 1000) * h;
      if (i === 0) ctx.moveTo(x, y);
      else ctx.lineTo(x, y);
    }
    if (op.p.length === 2) ctx.lineTo((op.p[0] / 1000) * w + 0.1, (op.p[1] / 1000) * h);
    ctx.stroke();
  }
}

// A member's pointer on the board (the pointer flow): where it is, in the
// strokes' 0..1000 units, or gone (it left the board). Compact JSON.
export type PointerAt = { x: number; y: number } | { gone: true };

export function encodePointer(p: PointerAt): Uint8Array {
  return new TextEncoder().encode(JSON.stringify('gone' in p ? { g: 1 } : { x: p.x, y: p.y }));
}

// decodePointer reads a pointer message; undefined for anything malformed.
export function decodePointer(b: Uint8Array): PointerAt | undefined {
  try {
    const o = JSON.parse(new TextDecoder().decode(b));
    if (o?.g === 1) return { gone: true };
    const ok = (v: unknown) => Number.isInteger(v) && (v as number) >= 0 && (v as number) <= 1000;
    return ok(o?.x) && ok(o?.y) ? { x: o.x, y: o.y } : undefined;
  } catch {
    return undefined;
  }
}
