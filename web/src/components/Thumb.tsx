import { useEffect, useState } from 'preact/hooks';
import { type Creds, thumbnail } from '../api';

// Thumb shows a member's camera as a still the node takes every few
// seconds, refreshed every 5 s; nothing for a member without a camera
// (asked again after 30 s).
export function Thumb({ creds, session, member, name }: { creds: Creds; session: string; member: string; name: string }) {
  const [url, setUrl] = useState('');
  useEffect(() => {
    let live = true;
    let current = '';
    let timer: ReturnType<typeof setTimeout> | undefined;
    const load = async () => {
      let next = 5000;
      try {
        const blob = await thumbnail(creds, session, member);
        if (!live) return;
        const u = URL.createObjectURL(blob);
        if (current) URL.revokeObjectURL(current);
        current = u;
        setUrl(u);
      } catch {
        next = 30000;
      }
      if (live) timer = setTimeout(load, next);
    };
    load();
    return () => {
      live = false;
      clearTimeout(timer);
      if (current) URL.revokeObjectURL(current);
    };
  }, [creds.key, creds.token, session, member]);
  return url ? <img class="thumb" src={url} alt={`${name}'s camera`} width={48} height={36} /> : null;
}
