import { useEffect, useState } from 'preact/hooks';
import { deleteRecording, exportRecording, listRecordings, stopRecording, updateRecording, type Recording } from '../api';
import { duration, size } from '../format';
import { navigate } from '../route';
import { KEY, KeyForm } from './Home';

// Recordings: the catalog (issue 15) — search, play (the recording
// exported as WebM, its streams in sync), download, rename, stop, delete.
// The operator's page: it uses the node's API key, as Home does.
export function Recordings() {
  const [key, setKey] = useState(localStorage.getItem(KEY) ?? '');
  if (!key) return <KeyForm onKey={(k) => (localStorage.setItem(KEY, k), setKey(k))} />;
  return <Catalog apiKey={key} />;
}

function Catalog({ apiKey }: { apiKey: string }) {
  const creds = { key: apiKey };
  const [q, setQ] = useState('');
  const [query, setQuery] = useState('');
  const [recs, setRecs] = useState<Recording[]>();
  const [err, setErr] = useState('');
  const [editing, setEditing] = useState<string>();
  const [deleting, setDeleting] = useState<string>();
  const [playing, setPlaying] = useState<{ id: string; url: string }>();
  const [busy, setBusy] = useState<string>(); // what is being fetched, for the status line

  useEffect(() => () => playing && URL.revokeObjectURL(playing.url), [playing]);

  // play fetches the recording as WebM (its streams in sync) and plays it
  // in the page; download saves it in the chosen format.
  const play = (r: Recording) =>
    act(async () => {
      setBusy(`Preparing ${r.title || 'the recording'}…`);
      try {
        const blob = await exportRecording(creds, r.id, 'webm');
        setPlaying({ id: r.id, url: URL.createObjectURL(blob) });
      } finally {
        setBusy(undefined);
      }
    });
  const download = (r: Recording, format: 'webm' | 'ogg' | 'wav') =>
    act(async () => {
      setBusy(`Exporting ${r.title || 'the recording'} as ${format.toUpperCase()}…`);
      try {
        const url = URL.createObjectURL(await exportRecording(creds, r.id, format));
        const a = document.createElement('a');
        a.href = url;
        a.download = `${(r.title || r.id).replace(/[^\w.-]+/g, '_')}.${format}`;
        a.click();
        setTimeout(() => URL.revokeObjectURL(url), 60_000);
      } finally {
        setBusy(undefined);
      }
    });

  const load = () => listRecordings(creds, query).then(setRecs, (e) => setErr(e.message));
  useEffect(() => {
    load();
    const t = setInterval(load, 5000);
    return () => clearInterval(t);
  }, [apiKey, query]);

  const act = async (f: () => Promise<unknown>) => {
    setErr('');
    try {
      await f();
      await load();
    } catch (e: any) {
      setErr(e.message ?? String(e));
    }
  };

  return (
    <main>
      <header class="bar">
        <h1>Recordings</h1>
        <nav class="bar-links" aria-label="Pages">
          <a href="/" onClick={(e) => (e.preventDefault(), navigate('/'))}>
            Sessions
          </a>
        </nav>
      </header>
      <form
        class="search"
        role="search"
        onSubmit={(e) => {
          e.preventDefault();
          setQuery(q.trim());
        }}
      >
        <label for="rec-q">Search titles and descriptions</label>
        <input id="rec-q" type="search" value={q} onInput={(e) => setQ((e.target as HTMLInputElement).value)} />
        <button type="submit">Search</button>
      </form>
      {err && (
        <p role="alert" class="error">
          {err}
        </p>
      )}
      {busy && (
        <p role="status" class="muted">
          {busy}
        </p>
      )}
      {recs === undefined ? (
        <p class="muted">Loading…</p>
      ) : recs.length === 0 ? (
        <p class="muted">{query ? `No recording matches “${query}”.` : 'No recordings yet. A chair starts one from the meeting.'}</p>
      ) : (
        <ul class="sessions" aria-label="Recordings">
          {recs.map((r) => (
            <li key={r.id} class="session" data-testid={'recording-' + r.id}>
              <div class="session-head">
                <strong>{r.title || 'Untitled recording'}</strong>
                <span class={'state state-' + r.state}>{r.state}</span>
                <span class="muted">{new Date(r.started_at).toLocaleString()}</span>
                <span class="muted" aria-label="duration">
                  {duration(r.duration_ms)}
                </span>
                <span class="muted">{size(r.size_bytes)}</span>
                <span class="muted">
                  {r.streams} {r.streams === 1 ? 'stream' : 'streams'}
                </span>
              </div>
              {r.description && <p class="muted">{r.description}</p>}
              {r.error && <p class="error">{r.error}</p>}
              {playing?.id === r.id && (
                <video class="playback" src={playing.url} controls autoplay aria-label={`Playing ${r.title || 'the recording'}`} data-testid="player" />
              )}
              {editing === r.id ? (
                <EditForm
                  rec={r}
                  onCancel={() => setEditing(undefined)}
                  onSave={(title, description) => act(() => updateRecording(creds, r.id, title, description).then(() => setEditing(undefined)))}
                />
              ) : (
                <div class="session-actions">
                  {r.state === 'recording' && (
                    <button onClick={() => act(() => stopRecording(creds, r.id))} aria-label={`Stop recording ${r.title}`}>
                      Stop
                    </button>
                  )}
                  {r.state !== 'recording' && r.streams > 0 && (
                    <>
                      <button onClick={() => play(r)} aria-label={`Play ${r.title || 'the recording'}`}>
                        Play
                      </button>
                      <label>
                        <span class="sr-only">Download {r.title || 'the recording'} as</span>
                        <select
                          value=""
                          onChange={(e) => {
                            const f = (e.target as HTMLSelectElement).value as 'webm' | 'ogg' | 'wav';
                            (e.target as HTMLSelectElement).value = '';
                            if (f) download(r, f);
                          }}
                        >
                          <option value="">Download…</option>
                          <option value="webm">WebM (video and audio)</option>
                          <option value="ogg">Ogg/Opus (audio)</option>
                          <option value="wav">WAV (audio)</option>
                        </select>
                      </label>
                    </>
                  )}
                  <button onClick={() => setEditing(r.id)} aria-label={`Rename ${r.title || 'the recording'}`}>
                    Rename
                  </button>
                  {deleting === r.id ? (
                    <span role="group" aria-label="Confirm deletion">
                      Delete {r.title || 'this recording'} and its {size(r.size_bytes)}?{' '}
                      <button class="danger" onClick={() => act(() => deleteRecording(creds, r.id).then(() => setDeleting(undefined)))}>
                        Delete for good
                      </button>{' '}
                      <button class="quiet" onClick={() => setDeleting(undefined)}>
                        Keep
                      </button>
                    </span>
                  ) : (
                    <button class="quiet" onClick={() => setDeleting(r.id)} aria-label={`Delete ${r.title || 'the recording'}`}>
                      Delete
                    </button>
                  )}
                </div>
              )}
            </li>
          ))}
        </ul>
      )}
    </main>
  );
}

function EditForm({ rec, onSave, onCancel }: { rec: Recording; onSave: (t: string, d: string) => void; onCancel: () => void }) {
  const [title, setTitle] = useState(rec.title);
  const [desc, setDesc] = useState(rec.description);
  return (
    <form
      class="create"
      aria-label={'Rename ' + (rec.title || 'recording')}
      onSubmit={(e) => {
        e.preventDefault();
        onSave(title.trim(), desc.trim());
      }}
    >
      <label>
        Title
        <input value={title} required maxLength={200} onInput={(e) => setTitle((e.target as HTMLInputElement).value)} />
      </label>
      <label>
        Description
        <input value={desc} maxLength={4000} onInput={(e) => setDesc((e.target as HTMLInputElement).value)} />
      </label>
      <button type="submit">Save</button>
      <button type="button" class="quiet" onClick={onCancel}>
        Cancel
      </button>
    </form>
  );
}
