import { useEffect, useRef, useState } from 'preact/hooks';
import type { ChatLine } from '../chat';
import type { TransportKind } from '../transport';

// ChatPanel: the session's chat, in the order the conversation delivers
// it; a message that never came is said so where it was due, and one that
// came after its deadline is marked late. Text only: nothing a member
// types is read as HTML. data-transport says what the chat travels over
// (websocket, datachannel) for tests and the curious; nothing else shows it.
export function ChatPanel(props: { lines: ChatLine[]; ready: boolean; transport?: TransportKind; send: (text: string) => boolean }) {
  const [draft, setDraft] = useState('');
  const list = useRef<HTMLOListElement>(null);
  useEffect(() => {
    const el = list.current;
    if (el) el.scrollTop = el.scrollHeight;
  }, [props.lines.length]);
  const submit = (e: Event) => {
    e.preventDefault();
    const t = draft.trim();
    if (t && props.send(t)) setDraft('');
  };
  return (
    <section class="panel chat" aria-labelledby="chat-h" data-transport={props.transport}>
      <h2 id="chat-h">Chat</h2>
      <ol class="chat-lines" ref={list} role="log" aria-live="polite" aria-label="Chat messages">
        {props.lines.length === 0 && <li class="muted">No messages yet.</li>}
        {props.lines.map((l) =>
          l.kind === 'missing' ? (
            <li key={l.key} class="chat-missing">
              ⚠ {l.text}
            </li>
          ) : (
            <li key={l.key} class={l.mine ? 'chat-mine' : ''} data-testid="chat-line">
              <span class="chat-from">{l.mine ? 'You' : l.from}</span>{' '}
              <time class="muted" dateTime={new Date(l.sent).toISOString()}>
                {new Date(l.sent).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' })}
              </time>
              {l.late && <span class="muted"> (arrived late)</span>}
              <div class="chat-text">{l.text}</div>
            </li>
          ),
        )}
      </ol>
      <form class="chat-form" onSubmit={submit}>
        <label for="chat-input" class="sr-only">
          Message
        </label>
        <input
          id="chat-input"
          value={draft}
          maxLength={4000}
          autocomplete="off"
          placeholder={props.ready ? 'Write a message' : 'Connecting…'}
          onInput={(e) => setDraft((e.target as HTMLInputElement).value)}
        />
        <button type="submit" disabled={!props.ready || !draft.trim()}>
          Send
        </button>
      </form>
    </section>
  );
}
