// Real SIP phones for the end-to-end tests: baresip (Debian's
// baresip-core) with a sine as its microphone, dialling through the node,
// dumping what it decodes to WAV files; and the Goertzel measure the Go
// tests use (internal/audio.ToneShare) to tell who hears whom.
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

// startBaresip starts a phone registered as user@domain through proxy
// (host:port) that runs commands (e.g. "/dial sip:…") and quits after
// quitAfter seconds, hanging up first. It resolves once the process is
// started; done() resolves when it has quit.
export function startBaresip({ user, password, domain, proxy, tone, quitAfter, commands }) {
  const dir = mkdtempSync(join(tmpdir(), 'convene-baresip-'));
  // baresip also binds TLS on the SIP port + 1, so ports go in twos.
  const sipPort = 20000 + 2 * Math.floor(Math.random() * 4000);
  const rtpBase = 30200 + 2 * Math.floor(Math.random() * 4000);
  writeFileSync(join(dir, 'config'), [
    'poll_method epoll', `sip_listen 127.0.0.1:${sipPort}`, `audio_source ausine,${tone}`, 'ausrc_srate 48000',
    'ausrc_channels 2', 'audio_player aubridge,nowhere', 'audio_alert aubridge,nowhere', 'module_path /usr/lib/baresip/modules',
    'module g711.so', 'module ausine.so', 'module aubridge.so', 'module sndfile.so', 'module_app account.so', 'module_app menu.so',
    `snd_path ${dir}`, `rtp_ports ${rtpBase}-${rtpBase + 20}`, 'net_interface 127.0.0.1', ''].join('\n'));
  writeFileSync(join(dir, 'accounts'),
    `<sip:${user}@${domain}>;auth_pass=${password};outbound="sip:${proxy}";regint=600;answermode=auto;audio_codecs=PCMU\n`);
  const args = ['-f', dir, '-t', String(quitAfter)];
  for (const c of commands ?? []) args.push('-e', c);
  const proc = spawn('baresip', args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  proc.stdout.on('data', (d) => (out += d));
  proc.stderr.on('data', (d) => (out += d));
  const done = new Promise((resolve) => proc.on('exit', resolve));
  return {
    proc, dir, done,
    output: () => out,
    stop: () => proc.exitCode === null && proc.kill('SIGKILL'),
    // decoded returns the longest WAV of what the phone decoded (sndfile
    // names them …dec….wav): { rate, pcm: Int16Array of the first channel }.
    decoded: () => {
      let best = { rate: 8000, pcm: new Int16Array(0) };
      for (const f of readdirSync(dir).filter((f) => f.includes('dec') && f.endsWith('.wav'))) {
        const w = readWAV(readFileSync(join(dir, f)));
        if (w.pcm.length > best.pcm.length) best = w;
      }
      return best;
    },
  };
}

// readWAV reads a 16-bit PCM WAV with a 44-byte header: the first channel.
export function readWAV(buf) {
  if (buf.length <= 44) return { rate: 8000, pcm: new Int16Array(0) };
  const channels = Math.max(1, buf.readUInt16LE(22));
  const rate = buf.readUInt32LE(24);
  const n = Math.floor((buf.length - 44) / (2 * channels));
  const pcm = new Int16Array(n);
  for (let i = 0; i < n; i++) pcm[i] = buf.readInt16LE(44 + 2 * channels * i);
  return { rate, pcm };
}

// toneShare is the share of x's energy at freq Hz (Goertzel): about 1 for
// a pure tone at freq, about 0 without it.
export function toneShare(x, freq, rate) {
  const c = 2 * Math.cos((2 * Math.PI * freq) / rate);
  let s1 = 0, s2 = 0, e = 0;
  for (const v of x) {
    const s0 = v + c * s1 - s2;
    s2 = s1;
    s1 = s0;
    e += v * v;
  }
  return e === 0 ? 0 : (s1 * s1 + s2 * s2 - c * s1 * s2) / ((e * x.length) / 2);
}
