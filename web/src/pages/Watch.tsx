import { useEffect, useRef, useState } from 'preact/hooks';

// Watch plays a session's HLS stream for a passive viewer (no camera, no
// microphone, no WebRTC): hls.js where the browser has Media Source
// Extensions, the browser's own HLS (Safari) otherwise. The token from the
// link's fragment (a listener's join token) goes to the node in the
// playlist's URL, which answers with a signed prefix for the segments.
// hls.js (its light build: no subtitles, alternate audio or DRM) is
// loaded only here, so the meeting's pages do not carry it.
export function Watch({ session, token }: { session: string; token: string }) {
  const video = useRef<HTMLVideoElement>(null);
  const [err, setErr] = useState('');
  useEffect(() => {
    const v = video.current;
    if (!v) return;
    const src = `/hls/${encodeURIComponent(session)}/index.m3u8?token=${encodeURIComponent(token)}`;
    let stop = () => {};
    let gone = false;
    import('hls.js/light').then(({ default: Hls }) => {
      if (gone) return;
      if (Hls.isSupported()) {
        // No worker: the page's CSP allows no blob: scripts.
        const hls = new Hls({ enableWorker: false });
        let retry: ReturnType<typeof setTimeout> | undefined;
        hls.on(Hls.Events.ERROR, (_e, d) => {
          if (!d.fatal) return;
          const code = d.response?.code;
          if (code === 404 && d.details === Hls.ErrorDetails.MANIFEST_LOAD_ERROR) {
            // The stream has just started (no playlist yet) or is off.
            setErr('Waiting for the stream…');
            retry = setTimeout(() => hls.loadSource(src), 2000);
            return;
          }
          setErr(code === 401 ? 'This link is not valid (any more).' : 'The stream stopped: ' + d.details);
        });
        hls.on(Hls.Events.MANIFEST_PARSED, () => setErr(''));
        hls.loadSource(src);
        hls.attachMedia(v);
        stop = () => {
          clearTimeout(retry);
          hls.destroy();
        };
      } else if (v.canPlayType('application/vnd.apple.mpegurl')) {
        v.src = src;
        stop = () => v.removeAttribute('src');
      } else {
        setErr('This browser plays no HLS.');
      }
    }, () => setErr('The player did not load.'));
    return () => {
      gone = true;
      stop();
    };
  }, [session, token]);
  return (
    <main class="watch">
      <h1>Watching the session</h1>
      <video ref={video} controls autoplay muted playsInline data-testid="hls-video" aria-label="The session's stream" />
      {err && (
        <p class="error" role="alert">
          {err}
        </p>
      )}
    </main>
  );
}
