import { useEffect, useRef } from 'preact/hooks';
import { Icon } from './Icon';

// Tile shows one participant: video (or an initial), name, speaking and
// muted indicators.
export function Tile(props: {
  stream?: MediaStream;
  name: string;
  local?: boolean;
  speaking?: boolean;
  muted?: boolean;
  cameraOff?: boolean;
  source?: string;
  quality?: string;
  testid?: string;
}) {
  const v = useRef<HTMLVideoElement>(null);
  useEffect(() => {
    if (v.current && props.stream && v.current.srcObject !== props.stream) v.current.srcObject = props.stream;
  });
  const hasVideo = !props.cameraOff && (props.stream?.getVideoTracks().length ?? 0) > 0;
  const label = `${props.name}${props.source === 'screen' ? ' (screen)' : ''}${props.local ? ' (you)' : ''}`;
  return (
    <figure class={'tile' + (props.speaking ? ' speaking' : '')} data-testid={props.testid} aria-label={label + (props.speaking ? ', speaking' : '')}>
      <video ref={v} autoplay playsInline muted={props.local} class={hasVideo ? '' : 'hidden'} />
      {!hasVideo && <div class="avatar">{props.name.slice(0, 1).toUpperCase() || '?'}</div>}
      <figcaption>
        <span class="name">{label}</span>
        {props.muted && (
          <span class="badge" role="img" aria-label="microphone muted" data-testid="muted">
            <Icon name="micOff" />
          </span>
        )}
        {props.quality && props.quality !== 'good' && <span class={'badge q-' + props.quality}>{props.quality} connection</span>}
      </figcaption>
    </figure>
  );
}
