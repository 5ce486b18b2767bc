/**
 * Talking to our token service and to the microphone, with every failure turned into Spanish text.
 *
 * The microphone is acquired by us rather than by the room, because a permission prompt can be answered
 * after the person already pressed Stop: the caller then stops the new track instead of publishing it,
 * so the browser's recording indicator goes off and the finished session is not revived.
 *
 * The page never names a room: the service opens a fresh one per session. To get back into the same room
 * after a reload, the page keeps the service's short-lived, single-use resume token in this tab's
 * sessionStorage and presents it on the next Start; a refused one (expired, already used) silently falls
 * back to a new session. Stopping forgets it. When the service is full it answers 503 with a Spanish
 * message (try again in a few minutes), shown as it is.
 */
import { createLocalAudioTrack, MediaDeviceFailure, type LocalAudioTrack } from 'livekit-client';

import { agentMode, type AgentMode } from './labels';

export interface SessionInfo {
  url: string;
  token: string;
  room: string;
  identity: string;
  /** Single-use token that lets this tab rejoin the same room after a reload. */
  resume?: string;
  /** How long `resume` is accepted, in seconds; the page renews it at half that while in the room. */
  resume_ttl_s?: number;
}

const RESUME_STORAGE_KEY = 'lexvoz.resume';

/** This tab's sessionStorage, or null where storage is disabled (sessions still work; reloads start afresh). */
export function tabStorage(): Storage | null {
  try {
    return typeof window !== 'undefined' ? window.sessionStorage : null;
  } catch {
    return null;
  }
}

/** The resume token this tab holds, if any. */
export function storedResume(): string | null {
  return tabStorage()?.getItem(RESUME_STORAGE_KEY) ?? null;
}

function rememberResume(token: string | undefined): void {
  const store = tabStorage();
  if (!store) return;
  if (token) store.setItem(RESUME_STORAGE_KEY, token);
  else store.removeItem(RESUME_STORAGE_KEY);
}

/** Forget the resume token: the person ended the session, so a reload must not bring it back. */
export function forgetResume(): void {
  tabStorage()?.removeItem(RESUME_STORAGE_KEY);
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
    typeof v.identity === 'string' &&
    (v.resume === undefined || typeof v.resume === 'string') &&
    (v.resume_ttl_s === undefined || isTtl(v.resume_ttl_s))
  );
}

function isTtl(value: unknown): value is number {
  return typeof value === 'number' && Number.isFinite(value) && value > 0;
}

/** What the person reads when the service is full (or cannot count its conversations) and gave no text. */
export const SERVICE_FULL_MESSAGE =
  'Lexvoz está atendiendo a todas las personas que puede en este momento. Vuelva a intentarlo en unos minutos.';

/** The service's own Spanish `{"error": ...}` of a 503 (its caps), or the fixed "full" message. */
async function unavailableMessage(response: Response): Promise<string> {
  try {
    const body: unknown = await response.json();
    const error = typeof body === 'object' && body !== null ? (body as Record<string, unknown>).error : undefined;
    if (typeof error === 'string' && error.trim() && error.length <= 300) return error;
  } catch {
    // not JSON (a proxy's own error page): the fixed message says enough
  }
  return SERVICE_FULL_MESSAGE;
}

/**
 * POST /api/session on our own origin; the answer holds a short-lived, single-room token. With `resume`
 * (this tab's stored resume token) the service returns the same room; if it refuses the token, a fresh
 * session is requested instead. The new resume token is stored for the next reload.
 */
export async function requestSession(signal?: AbortSignal, resume: string | null = storedResume()): Promise<SessionInfo> {
  let response: Response;
  try {
    response = await fetch('/api/session', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(resume ? { resume } : {}),
      cache: 'no-store',
      credentials: 'same-origin',
      signal,
    });
  } catch (err) {
    if (err instanceof DOMException && err.name === 'AbortError') throw err;
    throw new SessionRequestError('No se pudo contactar el servidor de Lexvoz. ¿Está en marcha?');
  }
  if (resume && (response.status === 401 || response.status === 400)) {
    forgetResume(); // expired or already used: start a new conversation instead
    return requestSession(signal, null);
  }
  if (response.status === 429) {
    const retry = Number(response.headers.get('Retry-After'));
    const wait = Number.isFinite(retry) && retry > 0 ? ` Vuelva a intentarlo en ${retry} s.` : '';
    throw new SessionRequestError(`Demasiadas sesiones seguidas.${wait}`);
  }
  if (response.status === 503) throw new SessionRequestError(await unavailableMessage(response));
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
  rememberResume(body.resume);
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

/**
 * The mode this site runs in, from GET /api/config: what the first screen's privacy notice needs before any
 * agent has joined to announce it. Undefined when the service cannot say (the notice then claims neither).
 */
export async function fetchSiteMode(signal?: AbortSignal): Promise<AgentMode | undefined> {
  try {
    const response = await fetch('/api/config', { cache: 'no-store', credentials: 'same-origin', signal });
    if (!response.ok) return undefined;
    const body: unknown = await response.json();
    return typeof body === 'object' && body !== null ? agentMode((body as { mode?: string }).mode) : undefined;
  } catch {
    return undefined;
  }
}

/** What a renewal of the resume token came to: the next token is stored, or none is held any more, or try later. */
export type RenewOutcome = { outcome: 'renewed'; ttlS: number } | { outcome: 'refused' } | { outcome: 'failed' };

/**
 * POST /api/session/renew: trade this tab's resume token for the next one while the person is in its room, so a
 * conversation longer than the token's life can still come back to the room (a reload, or livekit-server
 * restarting under it). A refused token (expired, spent, not ours) is forgotten; anything else (no network, the
 * service or livekit-server not answering, the person momentarily not in the room) keeps it for a later try.
 */
export async function renewResume(): Promise<RenewOutcome> {
  const resume = storedResume();
  if (!resume) return { outcome: 'refused' };
  let response: Response;
  try {
    response = await fetch('/api/session/renew', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ resume }),
      cache: 'no-store',
      credentials: 'same-origin',
    });
  } catch {
    return { outcome: 'failed' };
  }
  if (response.status === 401 || response.status === 400) {
    if (storedResume() === resume) forgetResume();
    return { outcome: 'refused' };
  }
  if (!response.ok) return { outcome: 'failed' };
  let body: unknown;
  try {
    body = await response.json();
  } catch {
    return { outcome: 'failed' };
  }
  const next = typeof body === 'object' && body !== null ? (body as Record<string, unknown>) : {};
  if (typeof next.resume !== 'string' || !next.resume || !isTtl(next.resume_ttl_s)) return { outcome: 'failed' };
  // A rejoin may have stored a newer token while this request was out; that one wins.
  if (storedResume() !== resume) return { outcome: 'failed' };
  rememberResume(next.resume);
  return { outcome: 'renewed', ttlS: next.resume_ttl_s };
}
