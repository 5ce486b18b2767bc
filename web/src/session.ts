/**
 * Talking to our token service and to the microphone, with every failure turned into Spanish text.
 *
 * The microphone is acquired by us rather than by the room, because a permission prompt can be answered
 * after the person already pressed Stop: the caller then stops the new track instead of publishing it,
 * so the browser's recording indicator goes off and the finished session is not revived.
 */
import { createLocalAudioTrack, MediaDeviceFailure, type LocalAudioTrack } from 'livekit-client';

export interface SessionInfo {
  url: string;
  token: string;
  room: string;
  identity: string;
}

export class SessionRequestError extends Error {}

function isSessionInfo(value: unknown): value is SessionInfo {
  if (typeof value !== 'object' || value === null) return false;
  const v = value as Record<string, unknown>;
  return (
    typeof v.url === 'string' &&
    /^(wss?|https?):\/\//.test(v.url) &&
    typeof v.token === 'string' &&
    v.token.length > 0 &&
    typeof v.room === 'string' &&
    typeof v.identity === 'string'
  );
}

/** POST /api/session on our own origin; the answer holds a short-lived, single-room token. */
export async function requestSession(signal?: AbortSignal): Promise<SessionInfo> {
  let response: Response;
  try {
    response = await fetch('/api/session', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: '{}',
      cache: 'no-store',
      credentials: 'same-origin',
      signal,
    });
  } catch (err) {
    if (err instanceof DOMException && err.name === 'AbortError') throw err;
    throw new SessionRequestError('No se pudo contactar el servidor de Lexvoz. ¿Está en marcha?');
  }
  if (response.status === 429) {
    const retry = Number(response.headers.get('Retry-After'));
    const wait = Number.isFinite(retry) && retry > 0 ? ` Vuelva a intentarlo en ${retry} s.` : '';
    throw new SessionRequestError(`Demasiadas sesiones seguidas.${wait}`);
  }
  if (!response.ok) {
    throw new SessionRequestError(`El servidor no pudo crear la sesión (código ${response.status}).`);
  }
  let body: unknown;
  try {
    body = await response.json();
  } catch {
    throw new SessionRequestError('El servidor respondió algo que no es una sesión válida.');
  }
  if (!isSessionInfo(body)) {
    throw new SessionRequestError('El servidor respondió algo que no es una sesión válida.');
  }
  return body;
}

export type MicrophoneResult = { ok: true; track: LocalAudioTrack } | { ok: false; message: string };

const MIC_MESSAGES: Record<MediaDeviceFailure, string> = {
  [MediaDeviceFailure.PermissionDenied]:
    'El navegador no permite usar el micrófono. Puede escribir sus preguntas abajo, o permitir el micrófono ' +
    'en la configuración del sitio y volver a empezar.',
  [MediaDeviceFailure.NotFound]: 'No se encontró ningún micrófono. Puede escribir sus preguntas abajo.',
  [MediaDeviceFailure.DeviceInUse]:
    'El micrófono está ocupado por otra aplicación. Puede escribir sus preguntas abajo.',
  [MediaDeviceFailure.Other]: 'No se pudo activar el micrófono. Puede escribir sus preguntas abajo.',
};

export function microphoneErrorMessage(error: unknown): string {
  const failure = MediaDeviceFailure.getFailure(error) ?? MediaDeviceFailure.Other;
  return MIC_MESSAGES[failure];
}

/** Ask for the microphone; never throws, so a refusal cannot break the rest of the session. */
export async function acquireMicrophone(): Promise<MicrophoneResult> {
  if (typeof navigator === 'undefined' || !navigator.mediaDevices?.getUserMedia) {
    return {
      ok: false,
      message:
        'Este navegador no ofrece el micrófono en esta dirección (hace falta https o localhost). ' +
        'Puede escribir sus preguntas abajo.',
    };
  }
  try {
    const track = await createLocalAudioTrack({ echoCancellation: true, noiseSuppression: true, autoGainControl: true });
    return { ok: true, track };
  } catch (error) {
    return { ok: false, message: microphoneErrorMessage(error) };
  }
}
