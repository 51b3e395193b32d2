import { useEffect, useState } from 'preact/hooks';
import { createSession, issueToken, issueViewToken, listSessions, sessionAction, type Session } from '../api';
import { joinLink, navigate, watchLink } from '../route';
import { VIEWER_LINK_TTL } from '../broadcast';
import { NodesPanel } from '../components/NodesPanel';

export const KEY = 'convene.apiKey';

// Home: the operator's sessions, with their state; create and schedule a
// session; share a join link, or a viewer link for its broadcast.
export function Home() {
  const [key, setKey] = useState(localStorage.getItem(KEY) ?? '');
  if (!key) return <KeyForm onKey={(k) => (localStorage.setItem(KEY, k), setKey(k))} />;
  return <Sessions apiKey={key} onForget={() => (localStorage.removeItem(KEY), setKey(''))} />;
}

export function KeyForm({ onKey }: { onKey: (k: string) => void }) {
  const [v, setV] = useState('');
  const [err, setErr] = useState('');
  return (
    <main class="narrow">
      <h1>Convene</h1>
      <p>Enter the node's API key (printed when the node first started) to manage sessions. Joining a session needs only its join link.</p>
      <form
        onSubmit={async (e) => {
          e.preventDefault();
          try {
            await listSessions({ key: v.trim() });
            onKey(v.trim());
          } catch (x: any) {
            setErr(x.message ?? String(x));
          }
        }}
      >
        <label for="apikey">API key</label>
        <input id="apikey" type="password" autocomplete="off" value={v} onInput={(e) => setV((e.target as HTMLInputElement).value)} required />
        <button type="submit">Continue</button>
        {err && <p role="alert" class="error">{err}</p>}
      </form>
    </main>
  );
}

function fmt(t?: string) {
  return t ? new Date(t).toLocaleString() : '';
}

function Sessions({ apiKey, onForget }: { apiKey: string; onForget: () => void }) {
  const creds = { key: apiKey };
  const [sessions, setSessions] = useState<Session[]>([]);
  const [err, setErr] = useState('');
  const [name, setName] = useState('');
  const [start, setStart] = useState('');
  const [end, setEnd] = useState('');
  const [links, setLinks] = useState<Record<string, string>>({});
  const [viewLinks, setViewLinks] = useState<Record<string, string>>({});
  const [role, setRole] = useState<Record<string, string>>({});

  const load = () => listSessions(creds).then(setSessions, (e) => setErr(e.message));
  useEffect(() => {
    load();
    const t = setInterval(load, 5000);
    return () => clearInterval(t);
  }, [apiKey]);

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
        <h1>Sessions</h1>
        <nav class="bar-links" aria-label="Pages">
          <a href="/recordings" onClick={(e) => (e.preventDefault(), navigate('/recordings'))}>
            Recordings
          </a>
          <button class="quiet" onClick={onForget}>
            Forget key
          </button>
        </nav>
      </header>
      <form
        class="create"
        aria-label="New session"
        onSubmit={(e) => {
          e.preventDefault();
          act(() =>
            createSession(creds, name, start ? new Date(start).toISOString() : undefined, end ? new Date(end).toISOString() : undefined).then(() => {
              setName('');
              setStart('');
              setEnd('');
            }),
          );
        }}
      >
        <label>
          Name
          <input value={name} required maxLength={200} onInput={(e) => setName((e.target as HTMLInputElement).value)} />
        </label>
        <label>
          Starts (empty: now)
          <input type="datetime-local" value={start} onInput={(e) => setStart((e.target as HTMLInputElement).value)} />
        </label>
        <label>
          Ends (optional)
          <input type="datetime-local" value={end} onInput={(e) => setEnd((e.target as HTMLInputElement).value)} />
        </label>
        <button type="submit">Create session</button>
      </form>
      {err && (
        <p role="alert" class="error">
          {err}
        </p>
      )}
      {sessions.length === 0 ? (
        <p class="muted">No sessions yet.</p>
      ) : (
        <ul class="sessions" aria-label="Sessions">
          {sessions.map((s) => (
            <li key={s.id} class="session" data-testid={'session-' + s.name}>
              <div class="session-head">
                <strong>{s.name}</strong>
                <span class={'state state-' + s.state}>{s.state}</span>
                <span class="muted">{s.members} members</span>
                {s.start_at && <span class="muted">from {fmt(s.start_at)}</span>}
                {s.end_at && <span class="muted">until {fmt(s.end_at)}</span>}
              </div>
              <div class="session-actions">
                {s.state === 'scheduled' && <button onClick={() => act(() => sessionAction(creds, s.id, 'activate'))}>Activate</button>}
                {s.state === 'activated' && <button onClick={() => act(() => sessionAction(creds, s.id, 'finish'))}>End</button>}
                {(s.state === 'activated' || s.state === 'scheduled') && (
                  <>
                    <label>
                      <span class="sr-only">Role for the join link of {s.name}</span>
                      <select value={role[s.id] ?? 'participant'} onChange={(e) => setRole({ ...role, [s.id]: (e.target as HTMLSelectElement).value })}>
                        <option value="participant">participant</option>
                        <option value="chair">chair</option>
                        <option value="listener">listener</option>
                      </select>
                    </label>
                    <button
                      onClick={() =>
                        act(async () => {
                          const t = await issueToken(creds, s.id, role[s.id] ?? 'participant');
                          const link = joinLink(location.origin, s.id, t.token);
                          setLinks({ ...links, [s.id]: link });
                          await navigator.clipboard?.writeText(link).catch(() => {});
                        })
                      }
                    >
                      Share join link
                    </button>
                    <button
                      aria-label={`Share viewer link for ${s.name}`}
                      onClick={() =>
                        act(async () => {
                          const t = await issueViewToken(creds, s.id, VIEWER_LINK_TTL);
                          const link = watchLink(location.origin, s.id, t.token);
                          setViewLinks({ ...viewLinks, [s.id]: link });
                          await navigator.clipboard?.writeText(link).catch(() => {});
                        })
                      }
                    >
                      Share viewer link
                    </button>
                  </>
                )}
              </div>
              {links[s.id] && (
                <p class="link">
                  <label>
                    Join link (copied)
                    <input readOnly value={links[s.id]} data-testid="join-link" onFocus={(e) => (e.target as HTMLInputElement).select()} />
                  </label>
                  <a href={links[s.id]}>Open</a>
                </p>
              )}
              {viewLinks[s.id] && (
                <p class="link">
                  <label>
                    Viewer link (copied; plays the session's broadcast once a chair starts it, valid 12 hours)
                    <input readOnly value={viewLinks[s.id]} data-testid="viewer-link" onFocus={(e) => (e.target as HTMLInputElement).select()} />
                  </label>
                  <a href={viewLinks[s.id]}>Open</a>
                </p>
              )}
            </li>
          ))}
        </ul>
      )}
      <NodesPanel creds={creds} />
    </main>
  );
}
