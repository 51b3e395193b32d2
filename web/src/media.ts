// Local devices: the pre-join preview and the tracks the room publishes.

export type Devices = { audio: MediaDeviceInfo[]; video: MediaDeviceInfo[] };

export async function listDevices(): Promise<Devices> {
  const all = await navigator.mediaDevices.enumerateDevices();
  return { audio: all.filter((d) => d.kind === 'audioinput'), video: all.filter((d) => d.kind === 'videoinput') };
}

export async function openLocal(audioId?: string, videoId?: string, video = true): Promise<MediaStream> {
  return navigator.mediaDevices.getUserMedia({
    audio: audioId ? { deviceId: { exact: audioId } } : true,
    video: video ? (videoId ? { deviceId: { exact: videoId }, width: 1280, height: 720 } : { width: 1280, height: 720 }) : false,
  });
}

// The choice made on the pre-join page, handed to the room.
export type JoinChoice = { name: string; audioId?: string; videoId?: string; camera: boolean; mic: boolean };

let choice: JoinChoice | undefined;
let local: MediaStream | undefined;
export function handOver(c: JoinChoice, s: MediaStream | undefined) {
  choice = c;
  local = s;
}
export function takeOver(): { choice?: JoinChoice; local?: MediaStream } {
  const r = { choice, local };
  choice = undefined;
  local = undefined;
  return r;
}
