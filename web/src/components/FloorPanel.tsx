import { floorStyles, type Floor, type Member } from '../api';

// floorLabel names a floor as people say it: the data floor is the
// whiteboard's.
export const floorLabel = (name: string) => (name === 'data' ? 'whiteboard' : name);

// FloorPanel: request and release each floor, see your place in the
// queue; a chair grants, denies, revokes and changes the style.
export function FloorPanel(props: {
  floors: Floor[];
  me: string;
  chair: boolean;
  names: Record<string, string>;
  act: (floor: string, action: string, body?: Record<string, unknown>) => void;
  style: (floor: string, style: string, auto: boolean) => void;
}) {
  const { floors, me, chair, names } = props;
  return (
    <section class="panel" aria-labelledby="floors-h">
      <h2 id="floors-h">Floor</h2>
      {floors.map((f) => {
        const holds = f.tokens.some((t) => t.holder === me);
        const mine = f.queue.find((r) => r.member === me && (r.status === 'Pending' || r.status === 'Accepted'));
        return (
          <div class="floor" data-testid={'floor-' + f.name} key={f.name}>
            <h3>
              {floorLabel(f.name)} <span class="muted">{f.style === 'none' ? 'open' : f.style.replace('_', ' ')}</span>
            </h3>
            {f.style === 'none' ? (
              <p class="muted">{f.name === 'data' ? 'Open: everyone may draw.' : 'Open: everyone may speak.'}</p>
            ) : (
              <>
                <p>
                  {holds ? (
                    <strong>You have the {floorLabel(f.name)} floor.</strong>
                  ) : mine ? (
                    <span data-testid="queue-position">
                      Waiting{mine.position ? `: number ${mine.position} in the queue` : ''}
                    </span>
                  ) : (
                    <span class="muted">Holders: {f.tokens.filter((t) => t.holder).map((t) => names[t.holder!] ?? t.holder).join(', ') || 'nobody'}</span>
                  )}
                </p>
                {holds ? (
                  <button onClick={() => props.act(f.name, 'release')}>Release {floorLabel(f.name)} floor</button>
                ) : mine ? (
                  <button onClick={() => props.act(f.name, 'cancel', { request_id: mine.id })}>Cancel request</button>
                ) : (
                  <button onClick={() => props.act(f.name, 'request')}>Request {floorLabel(f.name)} floor</button>
                )}
              </>
            )}
            {chair && (
              <div class="chair">
                <label>
                  Style of the {floorLabel(f.name)} floor
                  <select value={f.style} onChange={(e) => props.style(f.name, (e.target as HTMLSelectElement).value, false)}>
                    {floorStyles.map((s) => (
                      <option value={s}>{s === 'none' ? 'open (no floor control)' : s.replace('_', ' ')}</option>
                    ))}
                  </select>
                </label>
                <ul aria-label={`Requests for the ${floorLabel(f.name)} floor`}>
                  {f.queue
                    .filter((r) => r.status === 'Pending' || r.status === 'Accepted')
                    .map((r) => (
                      <li key={r.id}>
                        {names[r.member] ?? r.member} <span class="muted">{r.status}</span>{' '}
                        <button onClick={() => props.act(f.name, 'grant', { request_id: r.id })} aria-label={`Grant the ${floorLabel(f.name)} floor to ${names[r.member] ?? r.member}`}>
                          Grant
                        </button>{' '}
                        <button onClick={() => props.act(f.name, 'deny', { request_id: r.id })} aria-label={`Deny ${names[r.member] ?? r.member}`}>
                          Deny
                        </button>
                      </li>
                    ))}
                  {f.tokens
                    .filter((t) => t.holder)
                    .map((t) => (
                      <li key={t.id}>
                        {names[t.holder!] ?? t.holder} <span class="muted">holds it</span>{' '}
                        <button onClick={() => props.act(f.name, 'delete', { token_id: t.id })} aria-label={`Revoke the ${floorLabel(f.name)} floor from ${names[t.holder!] ?? t.holder}`}>
                          Revoke
                        </button>
                      </li>
                    ))}
                </ul>
              </div>
            )}
          </div>
        );
      })}
    </section>
  );
}

export type { Member };
