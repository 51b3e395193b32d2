import { useEffect, useRef, useState } from 'preact/hooks';
import { joinSession } from '../api';
import { handOver, listDevices, openLocal, type Devices } from '../media';
import { navigate } from '../route';

// Pre-join: camera and microphone preview, device choice, name.
export function Join({ session, joinToken }: { session: string; joinToken: string }) {
  const [name, setName] = useState(localStorage.getItem('convene.name') ?? '');
  const [devices, setDevices] = useState<Devices>({ audio: [], video: [] });
  const [audioId, setAudioId] = useState<string>();
  const [videoId, setVideoId] = useState<string>();
  const [camera, setCamera] = useState(true);
  const [mic, setMic] = useState(true);
  const [stream, setStream] = useState<MediaStream>();
  const [err, setErr] = useState(joinToken ? '' : 'This link has no join token: ask for a new link.');
  const [busy, setBusy] = useState(false);
  const video = useRef<HTMLVideoElement>(null);

  useEffect(() => {
    let s: MediaStream | undefined;
    let live = true;
    openLocal(audioId, videoId, camera)
      .then(async (x) => {
        if (!live) return x.getTracks().forEach((t) => t.stop());
        s = x;
        setStream(x);
        setDevices(await listDevices());
      })
      .catch((e) => setErr('Camera or microphone unavailable: ' + e.message));
    return () => {
      live = false;
      if (s && !handedOver.current) s.getTracks().forEach((t) => t.stop());
    };
  }, [audioId, videoId, camera]);
  const handedOver = useRef(false);

  useEffect(() => {
    if (video.current && stream) video.current.srcObject = stream;
  }, [stream]);

  const join = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setErr('');
    try {
      const r = await joinSession(joinToken, session, name.trim());
      localStorage.setItem('convene.name', name.trim());
      sessionStorage.setItem('convene.token.' + session, r.token.token);
      sessionStorage.setItem('convene.member.' + session, r.member.id);
      handedOver.current = true;
      handOver({ name: name.trim(), audioId, videoId, camera, mic }, stream);
      navigate('/s/' + encodeURIComponent(session));
    } catch (x: any) {
      setErr(x.status === 401 || x.status === 403 ? 'This join link has expired or was revoked: ask for a new one. (' + x.message + ')' : x.message);
      setBusy(false);
    }
  };

  return (
    <main class="narrow prejoin">
      <h1>Join the session</h1>
      <div class="preview">
        <video ref={video} autoplay muted playsInline aria-label="Your camera preview" />
        {!camera && <div class="avatar big">{(name || '?').slice(0, 1).toUpperCase()}</div>}
      </div>
      <form onSubmit={join}>
        <label for="name">Your name</label>
        <input id="name" value={name} required maxLength={64} autocomplete="name" onInput={(e) => setName((e.target as HTMLInputElement).value)} />
        <label for="mic-select">Microphone</label>
        <select id="mic-select" value={audioId} onChange={(e) => setAudioId((e.target as HTMLSelectElement).value)}>
          {devices.audio.map((d, i) => (
            <option value={d.deviceId}>{d.label || 'Microphone ' + (i + 1)}</option>
          ))}
        </select>
        <label for="cam-select">Camera</label>
        <select id="cam-select" value={videoId} onChange={(e) => setVideoId((e.target as HTMLSelectElement).value)}>
          {devices.video.map((d, i) => (
            <option value={d.deviceId}>{d.label || 'Camera ' + (i + 1)}</option>
          ))}
        </select>
        <div class="toggles">
          <label>
            <input type="checkbox" checked={mic} onChange={(e) => setMic((e.target as HTMLInputElement).checked)} /> Microphone on
          </label>
          <label>
            <input type="checkbox" checked={camera} onChange={(e) => setCamera((e.target as HTMLInputElement).checked)} /> Camera on
          </label>
        </div>
        <button type="submit" disabled={busy || !joinToken}>
          {busy ? 'Joining…' : 'Join'}
        </button>
        {err && (
          <p role="alert" class="error">
            {err}
          </p>
        )}
      </form>
    </main>
  );
}
