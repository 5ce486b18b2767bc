/**
 * Asking the page service for an agent again while none has joined the room.
 *
 * Why: LiveKit offers a room's agent job once. When every agent is busy (or none is running) that offer
 * fails and the room stays empty however long the person waits. `POST /api/agent` asks LiveKit again, so
 * the first agent that frees up takes the conversation. The page asks while the person waits, at the pace
 * the service names, and for a bounded time: past it, it says so and stops.
 *
 * The join token is only sent in the Authorization header of our own origin; it is never stored or logged.
 */
import { useEffect, useRef, useState } from 'react';

/**
 * Wait this long before the first request: just past the page service's OFFER_ANSWER_S (8 s), after which it
 * replaces an offer no worker took (none was registered: a worker reconnecting after a livekit-server restart).
 * Asking sooner cannot change anything (until then LiveKit may not yet list a job its worker already accepted);
 * a normal join is over by then, and a request that finds the agent joining or present makes no new dispatch.
 */
export const AGENT_REQUEST_AFTER_MS = 8_500;
/**
 * After an agent of this session left without ending the conversation (its worker died), the first request comes
 * sooner: its job is long listed, so the service can tell at once that nobody is coming and offer the room again.
 */
export const AGENT_LOST_REQUEST_AFTER_MS = 3_500;
/** Stop asking this long after the waiting began, and say no agent is available. */
export const AGENT_WAIT_LIMIT_MS = 10 * 60_000;
/** A request that has not answered in this long is abandoned and counts as a network failure. */
export const AGENT_REQUEST_TIMEOUT_MS = 10_000;
/** The service's pace is followed, but never faster or slower than this. */
export const MIN_RETRY_S = 2;
export const MAX_RETRY_S = 30;
/** The pace until the service has named one (a network failure keeps the last one). */
const DEFAULT_RETRY_S = 5;

export const AGENT_WAITING_MESSAGE =
  'Ningún agente está libre en este momento. Le atenderemos en cuanto uno quede libre; puede esperar aquí.';
export const AGENT_UNAVAILABLE_MESSAGE =
  'No hay ningún agente disponible. Pulse Detener e inténtelo de nuevo más tarde.';
export const SESSION_INVALID_MESSAGE = 'La sesión ya no es válida. Pulse Detener y empiece de nuevo.';
export const AGENT_JOINING_MESSAGE = 'Un agente está entrando en la conversación; un momento, por favor.';

/**
 * One answer of `POST /api/agent`. `retryS` is when to ask again (seconds, unclamped), or null when the
 * service did not say (network failure, unreadable answer): keep the current pace.
 */
export type AgentAnswer =
  | { kind: 'present'; retryS: number | null } // 200: an agent is in the room, the page will see it soon
  | { kind: 'joining'; retryS: number | null } // 202 "joining": a worker took the room, its agent is starting
  | { kind: 'waiting'; retryS: number | null } // 202 "requested" or "offered", 429, 503, network failure
  | { kind: 'invalid' }; // 401, 403, 404: the session cannot get an agent any more; stop asking

/** What the person is told about the missing agent. */
export type AgentWait = 'none' | 'joining' | 'waiting' | 'unavailable' | 'invalid';

/** The notice for a wait state: its text, and whether it is final (an alert) or just news (a status). */
export function agentWaitNotice(wait: AgentWait): { text: string; final: boolean } | null {
  switch (wait) {
    case 'joining':
      return { text: AGENT_JOINING_MESSAGE, final: false };
    case 'waiting':
      return { text: AGENT_WAITING_MESSAGE, final: false };
    case 'unavailable':
      return { text: AGENT_UNAVAILABLE_MESSAGE, final: true };
    case 'invalid':
      return { text: SESSION_INVALID_MESSAGE, final: true };
    default:
      return null;
  }
}

/** Seconds to milliseconds, kept within MIN_RETRY_S..MAX_RETRY_S so a bad answer cannot stall or flood. */
export function retryDelayMs(seconds: number): number {
  return Math.min(MAX_RETRY_S, Math.max(MIN_RETRY_S, seconds)) * 1_000;
}

function positiveSeconds(value: unknown): number | null {
  const n = typeof value === 'string' && value.trim() !== '' ? Number(value) : value;
  return typeof n === 'number' && Number.isFinite(n) && n > 0 ? n : null;
}

/** The answer's `agent` and `retry_after_s`, or nulls for an unreadable body. */
async function readBody(response: Response): Promise<{ agent: unknown; retryS: number | null }> {
  try {
    const body: unknown = await response.json();
    if (typeof body !== 'object' || body === null) return { agent: null, retryS: null };
    const fields = body as Record<string, unknown>;
    return { agent: fields.agent, retryS: positiveSeconds(fields.retry_after_s) };
  } catch {
    return { agent: null, retryS: null };
  }
}

/**
 * POST /api/agent with the session's join token. Never throws: every failure is an answer (an aborted or
 * failed request is "waiting" with no pace, so the caller decides whether to go on). `left`: the identity
 * of an agent seen leaving this room, so the service does not wait for it as if it were still joining.
 */
export async function requestAgent(
  token: string,
  signal: AbortSignal,
  fetchImpl: typeof fetch,
  left?: string,
): Promise<AgentAnswer> {
  let response: Response;
  const headers: Record<string, string> = { Authorization: `Bearer ${token}` };
  if (left) headers['Content-Type'] = 'application/json';
  try {
    response = await fetchImpl('/api/agent', {
      method: 'POST',
      headers,
      body: left ? JSON.stringify({ left }) : undefined,
      cache: 'no-store',
      credentials: 'same-origin',
      signal,
    });
  } catch {
    return { kind: 'waiting', retryS: null };
  }
  const header = positiveSeconds(response.headers.get('Retry-After'));
  if (response.status === 401 || response.status === 403 || response.status === 404) return { kind: 'invalid' };
  if (response.status === 200 || response.status === 202) {
    const body = await readBody(response);
    const retryS = body.retryS ?? header;
    if (response.status === 200) return { kind: 'present', retryS };
    return { kind: body.agent === 'joining' ? 'joining' : 'waiting', retryS };
  }
  // 429 (too soon), 503 (LiveKit did not answer) and anything unexpected: ask again later.
  return { kind: 'waiting', retryS: header };
}

/** The browser's fetch, looked up at call time; one stable function, so the hook's effect does not re-run. */
const browserFetch: typeof fetch = (input, init) => fetch(input, init);

export interface AgentRequestOptions {
  /** The session's LiveKit join token (proves the caller is a participant of the room). */
  token: string;
  /** This session's room is connected. */
  connected: boolean;
  /** An agent participant is in the room. */
  agentPresent: boolean;
  /** That agent's identity while it is in the room: named to the service if it leaves. */
  agentIdentity?: string;
  /** The agent ended the conversation itself: never ask for another. */
  ended: boolean;
  fetchImpl?: typeof fetch;
}

/**
 * While the room is connected with no agent in it (and the agent did not end the conversation), ask for
 * one `AGENT_REQUEST_AFTER_MS` after the waiting began (`AGENT_LOST_REQUEST_AFTER_MS` once an agent of this
 * session was lost), then again at the service's pace, until one joins,
 * the service says the session is no longer valid, or `AGENT_WAIT_LIMIT_MS` has passed. An agent that
 * leaves without announcing an end (its process died) starts the waiting over, so another can take over.
 *
 * Everything stops (timers cleared, the request in flight aborted) when the agent appears, the room
 * disconnects, the token changes (a new session) or the component unmounts.
 */
export function useAgentRequest({
  token,
  connected,
  agentPresent,
  agentIdentity,
  ended,
  fetchImpl = browserFetch,
}: AgentRequestOptions): AgentWait {
  const needed = connected && !agentPresent && !ended;
  const [wait, setWait] = useState<AgentWait>('none');
  // The last agent seen in this session's room. Read when asking, so remembering it re-runs nothing.
  const lastAgent = useRef<{ token: string; identity: string } | null>(null);
  useEffect(() => {
    if (agentPresent && agentIdentity) lastAgent.current = { token, identity: agentIdentity };
  }, [agentPresent, agentIdentity, token]);

  useEffect(() => {
    setWait('none');
    if (!needed) return;
    let stopped = false;
    let limit: ReturnType<typeof setTimeout> | undefined;
    let next: ReturnType<typeof setTimeout> | undefined;
    let requestTimeout: ReturnType<typeof setTimeout> | undefined;
    let inFlight: AbortController | null = null;
    let paceMs = DEFAULT_RETRY_S * 1_000;
    // The agent this session's room lost, if any (one of another session's room was never in this one).
    const lostAgent = () => (lastAgent.current?.token === token ? lastAgent.current.identity : undefined);

    const stop = () => {
      stopped = true;
      clearTimeout(next);
      clearTimeout(requestTimeout);
      clearTimeout(limit);
      inFlight?.abort();
      inFlight = null;
    };
    const ask = async () => {
      const controller = new AbortController();
      inFlight = controller;
      requestTimeout = setTimeout(() => controller.abort(), AGENT_REQUEST_TIMEOUT_MS);
      const answer = await requestAgent(token, controller.signal, fetchImpl, lostAgent());
      clearTimeout(requestTimeout);
      if (stopped) return; // stopped while it was in flight: nothing of it may show or schedule
      inFlight = null;
      if (answer.kind === 'invalid') {
        stop();
        setWait('invalid');
        return;
      }
      if (answer.retryS !== null) paceMs = retryDelayMs(answer.retryS);
      setWait(answer.kind === 'present' ? 'none' : answer.kind);
      next = setTimeout(() => void ask(), paceMs);
    };

    // Scheduled before any request: the limit holds however the requests go.
    limit = setTimeout(() => {
      stop();
      setWait('unavailable');
    }, AGENT_WAIT_LIMIT_MS);
    next = setTimeout(() => void ask(), lostAgent() ? AGENT_LOST_REQUEST_AFTER_MS : AGENT_REQUEST_AFTER_MS);
    return stop;
  }, [needed, token, fetchImpl]);

  // `needed` is checked here too so the notice goes the very render the agent appears.
  return needed ? wait : 'none';
}
