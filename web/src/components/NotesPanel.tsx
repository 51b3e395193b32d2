import { useEffect, useRef, useState } from 'preact/hooks';

// After this long without typing, an edit is shared.
const DEBOUNCE_MS = 500;

// NotesPanel: the session's shared notes (notes.ts), one text everyone in
// the meeting edits; not gated by the whiteboard's floor. What the member
// types is shared DEBOUNCE_MS after it stops typing; others' edits show
// unless the member has an edit of its own not yet shared (it replaces
// theirs when it is). save returns why an edit was not shared ('' if it
// was), said in the status line. Text only, like the chat.
export function NotesPanel(props: { text: string; by?: string; ready: boolean; save: (text: string) => string }) {
  const [draft, setDraft] = useState<string>(); // an edit not shared yet
  const [refused, setRefused] = useState('');
  const timer = useRef<ReturnType<typeof setTimeout>>();
  useEffect(() => () => clearTimeout(timer.current), []);

  const share = (t: string) => {
    const why = props.save(t);
    setRefused(why);
    if (!why) setDraft(undefined);
  };
  const onInput = (e: Event) => {
    const t = (e.target as HTMLTextAreaElement).value;
    setDraft(t);
    clearTimeout(timer.current);
    timer.current = setTimeout(() => share(t), DEBOUNCE_MS);
  };
  let status = refused;
  if (!status && draft !== undefined) status = 'Editing…';
  if (!status) status = props.by ? `Last edited by ${props.by}.` : props.text ? 'Shared with everyone in the session.' : '';
  return (
    <section class="panel notes" aria-labelledby="notes-h">
      <h2 id="notes-h">Notes</h2>
      <label for="notes-input" class="sr-only">
        Shared notes
      </label>
      <textarea
        id="notes-input"
        value={draft ?? props.text}
        disabled={!props.ready && draft === undefined && !props.text}
        placeholder={props.ready ? 'Meeting notes, shared with everyone in the session' : 'Connecting…'}
        onInput={onInput}
        aria-describedby="notes-status"
      />
      <p id="notes-status" role="status" class={refused ? 'notes-error' : 'muted'} data-testid="notes-status">
        {refused ? '⚠ ' : ''}
        {status}
      </p>
    </section>
  );
}
