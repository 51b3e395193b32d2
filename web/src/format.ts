// Numbers as people read them: a recording's duration and size.

export function duration(ms: number): string {
  const s = Math.round(ms / 1000);
  const h = Math.floor(s / 3600);
  const mm = String(Math.floor((s % 3600) / 60)).padStart(h ? 2 : 1, '0');
  const ss = String(s % 60).padStart(2, '0');
  return h ? `${h}:${mm}:${ss}` : `${mm}:${ss}`;
}

export function size(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KB`;
  if (bytes < 1024 ** 3) return `${(bytes / 1024 ** 2).toFixed(1)} MB`;
  return `${(bytes / 1024 ** 3).toFixed(2)} GB`;
}

// delay says a measured round trip between nodes: "0.4 ms", "38 ms",
// "no reply" when every recent probe was lost, "not measured yet", and
// the share lost when some were.
export function delay(rttSeconds: number, loss: number): string {
  if (loss >= 1) return 'no reply';
  if (rttSeconds <= 0) return 'not measured yet';
  const ms = rttSeconds * 1000;
  const d = ms < 10 ? `${ms.toFixed(1)} ms` : `${Math.round(ms)} ms`;
  return loss > 0 ? `${d}, ${Math.round(loss * 100)} % lost` : d;
}
