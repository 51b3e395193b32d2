import { useEffect, useRef, useState } from 'preact/hooks';
import type { Broadcast, BroadcastVideo } from '../api';
import { broadcastError } from '../broadcast';

// BroadcastPanel: a chair starts the session's HLS broadcast (the active
// speaker, or a 2×2 composite of the cameras), stops it, and copies a
// viewer link to hand out (a view token, which plays the broadcast and
// joins nothing; the page also shows the link, for where the clipboard is
// not allowed).
export function BroadcastPanel(props: {
  live?: Broadcast;
  start: (video: BroadcastVideo) => Promise<unknown>;
  stop: () => Promise<unknown>;
  viewerLink: () => Promise<string>;
}) {
  const { live } = props;
  const [video, setVideo] = useState<BroadcastVideo>('speaker');
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState('');
  const [link, setLink] = useState('');
  const [copied, setCopied] = useState(false);
  const linkField = useRef<HTMLInputElement>(null);
  // Where the clipboard refused, the link is selected for the keyboard's
  // copy.
  useEffect(() => {
    if (link && !copied) linkField.current?.focus();
  }, [link, copied]);
  const run = async (f: () => Promise<unknown>) => {
    setBusy(true);
    setErr('');
    try {
      await f();
    } catch (e) {
      setErr(broadcastError(e));
    } finally {
      setBusy(false);
    }
  };
  const copy = () =>
    run(async () => {
      const l = await props.viewerLink();
      setLink(l);
      setCopied(await navigator.clipboard?.writeText(l).then(() => true, () => false) ?? false);
    });
  return (
    <section class="panel broadcast" aria-labelledby="broadcast-h">
      <h2 id="broadcast-h">Broadcast</h2>
      <p role="status" data-testid="broadcast-state">
        {live ? (
          <>
            <span class="live-badge">● Live</span> since {new Date(live.started_at).toLocaleTimeString()}
            {live.restarts > 0 && <span class="muted"> · restarted {live.restarts}×</span>}
          </>
        ) : (
          <span class="muted">Not broadcast. Viewers with the link wait until you start.</span>
        )}
      </p>
      {!live && (
        <label>
          Show
          <select value={video} onChange={(e) => setVideo((e.target as HTMLSelectElement).value as BroadcastVideo)} disabled={busy}>
            <option value="speaker">the active speaker</option>
            <option value="composite">a 2×2 grid of the cameras</option>
          </select>
        </label>
      )}
      <div class="row">
        {live ? (
          <button class="danger" disabled={busy} onClick={() => run(props.stop)}>
            Stop broadcast
          </button>
        ) : (
          <button disabled={busy} onClick={() => run(() => props.start(video))}>
            Start broadcast
          </button>
        )}
        <button disabled={busy} onClick={copy}>
          Copy viewer link
        </button>
      </div>
      {link && (
        <p class="link">
          <label>
            Viewer link{copied ? ' (copied)' : ''}, valid 12 hours
            <input ref={linkField} readOnly value={link} data-testid="viewer-link" onFocus={(e) => (e.target as HTMLInputElement).select()} />
          </label>
        </p>
      )}
      {err && (
        <p class="error" role="alert" data-testid="broadcast-error">
          {err}
        </p>
      )}
    </section>
  );
}
