import { useEffect, useRef, useState } from 'preact/hooks';
import { viewerState, type ViewerState } from '../broadcast';

// Watch plays a session's HLS stream for a passive viewer (no camera, no
// microphone, no WebRTC): hls.js where the browser has Media Source
// Extensions, the browser's own HLS (Safari) otherwise. The token from the
// link's fragment (a view token) goes to the node in the
// playlist's URL, which answers with a signed prefix for the segments.
// The node's stream is low-latency HLS (fMP4 parts, blocking playlist
// reloads): hls.js plays it in its low-latency mode, a few parts behind
// the live edge, and the page shows how far behind it is. The session's
// mix is an audio rendition beside the video, so this is hls.js's full
// build (its light one plays no alternate audio); it is loaded only here,
// so the meeting's pages do not carry it.
//
// A broadcast that has not started yet, or has ended, answers 404: the
// page says which and opens the stream again every few seconds, so it
// plays once the chair starts (again). In a cluster the same retries
// carry it over a node's death: the session's owner starts the stream
// again under the same paths (hls.moved), and any node passes a viewer's
// requests to the node that runs it, so the page's own origin keeps
// serving it (unless that origin was the node that died).
export function Watch({ session, token }: { session: string; token: string }) {
  const video = useRef<HTMLVideoElement>(null);
  const [state, setState] = useState<ViewerState>();
  const [live, setLive] = useState(false);
  const [latency, setLatency] = useState<number>();
  useEffect(() => {
    const v = video.current;
    if (!v) return;
    const src = `/hls/${encodeURIComponent(session)}/index.m3u8?token=${encodeURIComponent(token)}`;
    let stop = () => {};
    let gone = false;
    import('hls.js').then(({ default: Hls }) => {
      if (gone) return;
      if (Hls.isSupported()) {
        let hls: InstanceType<typeof Hls> | undefined;
        let retry: ReturnType<typeof setTimeout> | undefined;
        // The player's distance from the live edge, once a second.
        const tick = setInterval(() => {
          const l = hls?.latency;
          setLatency(l !== undefined && Number.isFinite(l) && l > 0 ? l : undefined);
        }, 1000);
        let played = false;
        // open starts a player of its own each time: one that failed
        // fatally is not reused.
        const open = () => {
          hls?.destroy();
          // No worker: the page's CSP allows no blob: scripts. A player
          // that fell behind its target (the playlist's PART-HOLD-BACK)
          // plays a little faster until it is back.
          const h = new Hls({ enableWorker: false, lowLatencyMode: true, maxLiveSyncPlaybackRate: 1.5 });
          hls = h;
          h.on(Hls.Events.ERROR, (_e, d) => {
            if (!d.fatal || h !== hls) return;
            const s = viewerState(d.response?.code || undefined, d.details, played);
            setLive(false);
            setState(s);
            if (s.retryMs !== undefined) retry = setTimeout(open, s.retryMs);
            else h.destroy();
          });
          h.on(Hls.Events.MANIFEST_PARSED, () => {
            played = true;
            setState(undefined);
            setLive(true);
          });
          h.loadSource(src);
          h.attachMedia(v);
        };
        open();
        stop = () => {
          clearTimeout(retry);
          clearInterval(tick);
          hls?.destroy();
        };
      } else if (v.canPlayType('application/vnd.apple.mpegurl')) {
        v.src = src;
        stop = () => v.removeAttribute('src');
      } else {
        setState({ message: 'This browser plays no HLS.', alert: true });
      }
    }, () => setState({ message: 'The player did not load.', alert: true }));
    return () => {
      gone = true;
      stop();
    };
  }, [session, token]);
  return (
    <main class="watch">
      <h1>
        Watching the session{' '}
        {live && (
          <span class="live-badge" data-testid="watch-live">
            ● Live
          </span>
        )}{' '}
        {live && latency !== undefined && (
          <span class="latency" data-testid="watch-latency" data-seconds={latency.toFixed(2)}>
            {latency.toFixed(1)} s behind
          </span>
        )}
      </h1>
      <video ref={video} controls autoplay muted playsInline data-testid="hls-video" aria-label="The session's stream" />
      {state && (
        <p class={state.alert ? 'error' : 'banner'} role={state.alert ? 'alert' : 'status'} data-testid="watch-state">
          {state.message}
        </p>
      )}
    </main>
  );
}
