import { useEffect, useRef, useState } from 'preact/hooks';
import { COLORS, draw, quantize, type BoardOp, type PointerAt } from '../board';

// A pointer's position goes out at most this often while it moves (and
// once more where it stopped).
const POINTER_EVERY_MS = 100;

// OtherPointer is another member's pointer on the board.
export type OtherPointer = { key: number; name: string; x: number; y: number };

// Whiteboard: a shared canvas. Strokes go out as segments while they are
// drawn (every 50 ms at most), so others see them grow; everyone draws
// what the conversation delivered, in its order. When the whiteboard's
// floor has a style, only its holders draw (the node refuses the rest).
// Everyone's pointer over the board goes to the others, who see a dot
// with the member's name; the pointer is not gated by the floor (one
// points at what the holder drew). The dots are decoration for mouse and
// touch users: hidden from assistive technology, never in the way of a
// click or of the keyboard.
export function Whiteboard(props: {
  ops: BoardOp[];
  mayDraw: boolean;
  send: (op: BoardOp) => boolean;
  who: string[];
  pointers: OtherPointer[];
  point: (p: PointerAt) => void;
}) {
  const canvas = useRef<HTMLCanvasElement>(null);
  const [color, setColor] = useState(COLORS[0]);
  const live = useRef<{ id: string; pts: number[]; last?: [number, number]; at: number }>();
  const aim = useRef<{ at: number; shown: boolean; next?: [number, number]; timer?: ReturnType<typeof setTimeout> }>({ at: 0, shown: false });
  useEffect(() => () => clearTimeout(aim.current.timer), []);

  useEffect(() => {
    const c = canvas.current;
    const ctx = c?.getContext('2d');
    if (c && ctx) draw(ctx, props.ops, c.width, c.height);
  }, [props.ops]);

  const point = (e: PointerEvent): [number, number] => {
    const r = canvas.current!.getBoundingClientRect();
    return quantize(e.clientX - r.left, e.clientY - r.top, r.width, r.height);
  };
  const flush = () => {
    const s = live.current;
    if (!s || s.pts.length < 2) return;
    props.send({ t: 's', id: s.id, c: color, w: 3, p: s.pts });
    const [x, y] = [s.pts[s.pts.length - 2], s.pts[s.pts.length - 1]];
    s.pts = [x, y]; // the next segment starts where this one ended
    s.at = performance.now();
  };
  const down = (e: PointerEvent) => {
    if (!props.mayDraw) return;
    canvas.current?.setPointerCapture(e.pointerId);
    live.current = { id: Math.random().toString(36).slice(2, 10), pts: point(e), at: performance.now() };
  };
  const sendAim = () => {
    const a = aim.current;
    a.timer = undefined;
    if (!a.next) return;
    props.point({ x: a.next[0], y: a.next[1] });
    a.next = undefined;
    a.shown = true;
    a.at = performance.now();
  };
  const aimAt = (e: PointerEvent) => {
    const a = aim.current;
    a.next = point(e);
    const wait = a.at + POINTER_EVERY_MS - performance.now();
    if (wait <= 0) sendAim();
    else if (!a.timer) a.timer = setTimeout(sendAim, wait);
  };
  const leave = () => {
    const a = aim.current;
    clearTimeout(a.timer);
    a.timer = a.next = undefined;
    if (a.shown) props.point({ gone: true });
    a.shown = false;
  };
  const move = (e: PointerEvent) => {
    aimAt(e);
    const s = live.current;
    if (!s) return;
    s.pts.push(...point(e));
    if (performance.now() - s.at > 50 || s.pts.length >= 400) flush();
  };
  const up = () => {
    flush();
    live.current = undefined;
  };
  const strokes = props.ops.filter((o) => o.t === 's').length;
  return (
    <section class="panel board" aria-labelledby="board-h">
      <h2 id="board-h">Whiteboard</h2>
      <div class="board-area">
        <canvas
          ref={canvas}
          width={800}
          height={600}
          class={props.mayDraw ? 'drawable' : ''}
          role="img"
          aria-label={strokes ? `Whiteboard with ${strokes} stroke segments by ${props.who.join(', ') || 'members'}` : 'Empty whiteboard'}
          data-testid="whiteboard"
          onPointerDown={down}
          onPointerMove={move}
          onPointerUp={up}
          onPointerCancel={up}
          onPointerLeave={leave}
        />
        {props.pointers.map((p) => (
          <span key={p.key} class="pointer" style={{ left: `${p.x / 10}%`, top: `${p.y / 10}%` }} aria-hidden="true" data-testid="pointer">
            <span class="pointer-dot" />
            <span class="pointer-name">{p.name}</span>
          </span>
        ))}
      </div>
      <div class="board-tools">
        {COLORS.map((c) => (
          <button
            key={c}
            class={'swatch' + (c === color ? ' on' : '')}
            style={{ background: c }}
            aria-label={'Pen colour ' + c}
            aria-pressed={c === color}
            onClick={() => setColor(c)}
          />
        ))}
        <button class="quiet" disabled={!props.mayDraw} onClick={() => props.send({ t: 'c' })}>
          Clear the board
        </button>
      </div>
      {!props.mayDraw && <p class="muted">Only the whiteboard floor's holder draws now.</p>}
    </section>
  );
}
