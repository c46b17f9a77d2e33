// Voice in the chat: a microphone recording sent as a WAV clip to
// POST api/voice/transcribe, and "read aloud" of an answer (POST api/voice/speech)
// played in an <audio> element.
// Why WAV built here rather than MediaRecorder's WebM/Opus: every transcription
// server takes 16-bit PCM WAV, while Opus in WebM needs a decoder on the server
// side; 16 kHz mono speech is ~32 kB a second, well under the route's 10 MiB.
import { html, useState, useRef, useEffect } from '../lib.js';
import { t } from '../i18n.js';
import { api } from '../api.js';
import { Icon } from './icons.js';

const RATE = 16000;

function wav(samples, rate) {
  const buf = new ArrayBuffer(44 + samples.length * 2);
  const v = new DataView(buf);
  const str = (o, s) => [...s].forEach((c, i) => v.setUint8(o + i, c.charCodeAt(0)));
  str(0, 'RIFF');
  v.setUint32(4, 36 + samples.length * 2, true);
  str(8, 'WAVE');
  str(12, 'fmt ');
  v.setUint32(16, 16, true);
  v.setUint16(20, 1, true); // PCM
  v.setUint16(22, 1, true); // mono
  v.setUint32(24, rate, true);
  v.setUint32(28, rate * 2, true);
  v.setUint16(32, 2, true);
  v.setUint16(34, 16, true);
  str(36, 'data');
  v.setUint32(40, samples.length * 2, true);
  samples.forEach((s, i) => v.setInt16(44 + i * 2, Math.max(-1, Math.min(1, s)) * 0x7fff, true));
  return new Blob([buf], { type: 'audio/wav' });
}

// Average down to 16 kHz (speech needs no more; a recogniser expects it).
function downsample(chunks, from) {
  const all = new Float32Array(chunks.reduce((n, c) => n + c.length, 0));
  let at = 0;
  for (const c of chunks) {
    all.set(c, at);
    at += c.length;
  }
  if (from <= RATE) return all;
  const ratio = from / RATE;
  const out = new Float32Array(Math.floor(all.length / ratio));
  for (let i = 0; i < out.length; i++) {
    const start = Math.floor(i * ratio);
    const end = Math.min(all.length, Math.floor((i + 1) * ratio));
    let sum = 0;
    for (let j = start; j < end; j++) sum += all[j];
    out[i] = end > start ? sum / (end - start) : 0;
  }
  return out;
}

async function startRecording() {
  const stream = await navigator.mediaDevices.getUserMedia({ audio: true });
  const Ctx = window.AudioContext || window.webkitAudioContext;
  const ctx = new Ctx();
  const source = ctx.createMediaStreamSource(stream);
  const node = ctx.createScriptProcessor(4096, 1, 1);
  const chunks = [];
  node.onaudioprocess = (e) => chunks.push(new Float32Array(e.inputBuffer.getChannelData(0)));
  source.connect(node);
  node.connect(ctx.destination);
  return async () => {
    source.disconnect();
    node.disconnect();
    stream.getTracks().forEach((tr) => tr.stop());
    const rate = ctx.sampleRate;
    await ctx.close();
    return wav(downsample(chunks, rate), Math.min(rate, RATE));
  };
}

// The composer's microphone: press to record, press again to stop; the
// transcript goes into the input (onText) and is sent (onSend) at once.
export function MicButton({ onText, onSend, disabled }) {
  const [state, setState] = useState('idle'); // idle | recording | hearing
  const [error, setError] = useState(null);
  const stop = useRef(null);
  useEffect(() => () => stop.current && stop.current(), []);
  const [why, setWhy] = useState(false);
  const supported = !!(navigator.mediaDevices && navigator.mediaDevices.getUserMedia);
  // Browsers give the microphone only to https pages and to localhost: over plain http
  // on the home network the button stays, greyed, and a tap says why (docs/install.md
  // explains serving Skald over https). A browser without recording at all shows nothing.
  if (!supported && !window.isSecureContext) {
    return html`<span class="mic">
      <button type="button" class="icon-btn is-unavailable" aria-expanded=${why ? 'true' : 'false'}
        aria-label=${t('chat.mic_needs_https')} title=${t('chat.mic_needs_https')} onClick=${() => setWhy(!why)}
        data-testid="chat-mic" data-state="unavailable">${Icon.mic()}</button>
      ${why && html`<span class="mic__why small" role="status" data-testid="chat-mic-why">${t('chat.mic_needs_https')}</span>`}
    </span>`;
  }
  if (!supported) return null;
  const toggle = async () => {
    setError(null);
    if (state === 'idle') {
      try {
        stop.current = await startRecording();
        setState('recording');
      } catch (e) {
        setError(t('chat.mic_denied'));
      }
      return;
    }
    if (state !== 'recording') return;
    setState('hearing');
    try {
      const clip = await stop.current();
      stop.current = null;
      const heard = await api.transcribe(clip);
      const text = (heard.text || '').trim();
      if (!text) {
        setError(t('chat.mic_nothing'));
      } else {
        onText(text);
        await onSend(text);
      }
    } catch (e) {
      setError((e && e.message) || t('chat.mic_failed'));
    } finally {
      setState('idle');
    }
  };
  const label = state === 'recording' ? t('chat.mic_stop') : state === 'hearing' ? t('chat.mic_hearing') : t('chat.mic');
  return html`<span class="mic">
    <button type="button" class=${`icon-btn${state === 'recording' ? ' is-recording' : ''}`} onClick=${toggle}
      disabled=${disabled || state === 'hearing'} aria-pressed=${state === 'recording' ? 'true' : 'false'}
      aria-label=${label} title=${label} data-testid="chat-mic" data-state=${state}>${Icon.mic()}</button>
    ${error && html`<span class="mic__error small" role="alert" data-testid="chat-mic-error">${error}</span>`}
  </span>`;
}

// "Read aloud" under an answer: the audio comes from the speech model through Skald.
export function ReadAloudButton({ text }) {
  const [src, setSrc] = useState(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  useEffect(() => () => src && URL.revokeObjectURL(src), [src]);
  const onClick = async () => {
    if (busy) return;
    setBusy(true);
    setError(null);
    try {
      const blob = await api.speech(text);
      setSrc(URL.createObjectURL(blob));
    } catch (e) {
      setError((e && e.message) || t('chat.read_aloud_failed'));
    } finally {
      setBusy(false);
    }
  };
  return html`<span class="read-aloud">
    <button type="button" class="msg-action" onClick=${onClick} disabled=${busy} data-testid="message-read-aloud"
      aria-label=${t('chat.read_aloud')} title=${t('chat.read_aloud')}>
      ${Icon.speaker()}<span class="msg-action__label">${t('chat.read_aloud')}</span></button>
    ${src && html`<audio src=${src} controls autoplay data-testid="message-audio"></audio>`}
    ${error && html`<span class="small" role="alert" data-testid="message-read-aloud-error">${error}</span>`}
  </span>`;
}
