// Local devices: the pre-join preview and the tracks the room publishes.

export type Devices = { audio: MediaDeviceInfo[]; video: MediaDeviceInfo[] };

export async function listDevices(): Promise<Devices> {
  const all = await navigator.mediaDevices.enumerateDevices();
  return { audio: all.filter((d) => d.kind === 'audioinput'), video: all.filter((d) => d.kind === 'videoinput') };
}

// captureSize is the camera size asked for: 1280×720, or 640×360 on a
// machine of two cores or fewer. The camera is encoded three times over
// (simulcast) while the others' video is decoded; at 720p that takes most
// of two cores, and the browser would lower it itself after seconds of
// overuse. Measured on such a machine (web/bench/jointime.mjs): joins
// reach the first remote frame about 0.3 s sooner at 640×360.
export function captureSize(cores = navigator.hardwareConcurrency || 4): { width: number; height: number } {
  return cores <= 2 ? { width: 640, height: 360 } : { width: 1280, height: 720 };
}

// simulcastLayers are the encodings a camera of the given height is sent
// in: three layers (¼, ½ and full size) from 540 lines up, two (½ and
// full) from 360, one below. Chromium sends no more layers than a size
// allows (3 at 540p and up, 2 at 360p, 1 below) and drops the top ones:
// asking for three of a 360p camera would lose its full size.
export function simulcastLayers(height: number): RTCRtpEncodingParameters[] {
  if (height >= 540) {
    return [
      { rid: 'l', scaleResolutionDownBy: 4, maxBitrate: 150_000 },
      { rid: 'm', scaleResolutionDownBy: 2, maxBitrate: 500_000 },
      { rid: 'h', maxBitrate: 1_500_000 },
    ];
  }
  if (height >= 360) {
    return [
      { rid: 'l', scaleResolutionDownBy: 2, maxBitrate: 200_000 },
      { rid: 'h', maxBitrate: 800_000 },
    ];
  }
  return [{ maxBitrate: 500_000 }];
}

export async function openLocal(audioId?: string, videoId?: string, video = true): Promise<MediaStream> {
  const size = captureSize();
  return navigator.mediaDevices.getUserMedia({
    audio: audioId ? { deviceId: { exact: audioId } } : true,
    video: video ? (videoId ? { deviceId: { exact: videoId }, ...size } : size) : false,
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
