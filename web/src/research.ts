/**
 * The research panel's model: parse `lexvoz.research` messages from the agent and fold them into state.
 *
 * Kept free of React so the rules the panel depends on (only the agent may speak on this topic, only
 * well-formed messages count, only http/https links are ever shown) are unit-tested on their own.
 *
 * Besides the messages of each search, the worker checks every article the agent names while it speaks against
 * the sources delivered to it in the conversation (`citation_checked`). Those checks are kept here too, in the
 * order they arrived: the panel says which cited articles were not among the sources and which card a verified
 * one came from, and the transcript marks the words (citations.ts).
 */
import { isAgentSender, isJsonObject as isObject, parseJsonObject, type AgentSender, type JsonObject } from './agentMessage';

export { isAgentSender };

export const RESEARCH_TOPIC = 'lexvoz.research';
export const PROTOCOL_VERSION = 1;

/** Bigger than any honest message (3 sources of bounded size); anything larger is not parsed at all. */
export const MAX_MESSAGE_CHARS = 64 * 1024;
/** Old searches are dropped so a long conversation does not grow the page without bound. */
export const MAX_ENTRIES = 20;
export const MAX_SOURCES = 5;
/** Citation checks kept per conversation, oldest dropped first: the page must not grow without bound. */
export const MAX_CITATIONS = 100;

const LIMITS = {
  callId: 200,
  query: 2_000,
  title: 1_000,
  citation: 1_000,
  excerpt: 750,
  meta: 200,
  url: 2_000,
  reason: 64,
  said: 300,
  article: 20,
  norm: 200,
} as const;

export const FAILURE_REASONS = [
  'timeout',
  'transport',
  'auth',
  'tool_error',
  'invalid_result',
  'circuit_open',
  'rate_limited',
  'invalid_arguments',
  'contract',
] as const;
export type FailureReason = (typeof FAILURE_REASONS)[number];

/** What the person reads for each failure code; unknown future codes fall back to a generic line. */
export const FAILURE_TEXT: Record<FailureReason, string> = {
  timeout: 'La búsqueda tardó demasiado y se canceló.',
  transport: 'No se pudo contactar el servicio de búsqueda.',
  auth: 'El servicio de búsqueda rechazó las credenciales.',
  tool_error: 'El servicio de búsqueda devolvió un error.',
  invalid_result: 'El servicio de búsqueda devolvió un resultado no válido.',
  circuit_open: 'El servicio de búsqueda está en pausa tras varios fallos; se reintentará en breve.',
  rate_limited: 'Se alcanzó el límite de búsquedas por minuto; espere un momento.',
  invalid_arguments: 'La consulta generada no era válida.',
  contract: 'El servicio de búsqueda configurado no es compatible con Lexvoz.',
};
export const GENERIC_FAILURE_TEXT = 'La búsqueda falló.';

/** Why a search was interrupted: the agent left the room (its worker stopped), or the session ended. */
export type InterruptionReason = 'agent_left' | 'session_ended';

/** Why a search was interrupted, as the person reads it. */
export function interruptionText(reason: InterruptionReason | undefined): string {
  return reason === 'session_ended'
    ? 'Interrumpida: la sesión terminó antes de que acabara esta búsqueda.'
    : 'Interrumpida: el agente se desconectó antes de terminar esta búsqueda.';
}

export function failureText(reason: string): string {
  return (FAILURE_REASONS as readonly string[]).includes(reason)
    ? FAILURE_TEXT[reason as FailureReason]
    : GENERIC_FAILURE_TEXT;
}

export interface ResearchSource {
  title: string;
  citation: string;
  excerpt: string;
  date?: string;
  gaceta?: string;
  officialSourceName?: string;
  /** Present only when the agent's URL parsed as http: or https:; normalised by the URL parser. */
  officialSourceUrl?: string;
}

export type ResearchMessage =
  | { type: 'started'; callId: string; turn: number; query: string }
  | { type: 'completed'; callId: string; turn: number; toolDurationMs: number; sources: ResearchSource[] }
  | { type: 'failed'; callId: string; turn: number; reason: string }
  | { type: 'discarded'; callId: string; turn: number }
  | {
      type: 'citation_checked';
      /** The search that delivered the source holding the citation; null when no delivered source holds it. */
      callId: string | null;
      turn: number;
      /** The words as spoken, folded (lowercase, no accents, numbers as digits). */
      said: string;
      article: string;
      /** The norm's key as the worker writes it ("constitucion", "ley 6 de 2002"); null when none was named. */
      norm: string | null;
      verified: boolean;
      /** The citation of the source that holds it, exactly as on its card; null when not verified. */
      source: string | null;
    };

type CitationMessage = Extract<ResearchMessage, { type: 'citation_checked' }>;

/** One citation check as the page keeps it: the message, numbered in the order it arrived (from 1). */
export interface CitationCheck extends Omit<CitationMessage, 'type'> {
  seq: number;
}

/**
 * `interrupted`: no outcome can come any more; `interruption` says why: `agent_left` (the agent left the room, its
 * worker stopped) or `session_ended` (the person stopped, or the session ended, while it ran).
 */
export type ResearchStatus = 'running' | 'completed' | 'failed' | 'discarded' | 'interrupted';

export interface ResearchEntry {
  callId: string;
  turn: number;
  query?: string;
  status: ResearchStatus;
  sources: ResearchSource[];
  toolDurationMs?: number;
  /** A failed search's failure code, as the agent sent it (`failureText` reads it). */
  reason?: string;
  /** An interrupted search's cause: a field of its own, so no failure code can pass for one, or one for it. */
  interruption?: InterruptionReason;
}

export interface ResearchState {
  /** Newest first. */
  entries: ResearchEntry[];
  /**
   * The conversation these entries belong to has ended (Stop, a lost connection, a failed voice model):
   * the panel keeps them, marked as the previous conversation's, until the next Start resets it.
   */
  ended?: boolean;
  /** The call whose outcome (completed, failed, interrupted) arrived last: what the panel announces. */
  lastOutcome?: string;
  /** Citation checks of this conversation, oldest first; a repeat of the same check is kept once. */
  citations?: CitationCheck[];
}

export const initialResearchState: ResearchState = { entries: [] };

/** Who sent a message (the rule on who may: `isAgentSender`, shared with the other agent topics). */
export type ResearchSender = AgentSender;

export type ResearchAction =
  | { type: 'received'; sender: ResearchSender | undefined; payload: string | Uint8Array }
  | { type: 'agentGone' }
  | { type: 'sessionEnded' }
  | { type: 'reset' };

/** The URL as the browser would follow it, or undefined unless it is http/https (no javascript:, data:...). */
export function safeHttpUrl(value: unknown): string | undefined {
  if (typeof value !== 'string' || value.length === 0 || value.length > LIMITS.url) return undefined;
  let parsed: URL;
  try {
    parsed = new URL(value);
  } catch {
    return undefined;
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') return undefined;
  if (parsed.username || parsed.password) return undefined;
  return parsed.href;
}

type Json = JsonObject;

function boundedString(value: unknown, max: number, allowEmpty = false): string | undefined {
  if (typeof value !== 'string') return undefined;
  const trimmed = value.trim();
  if (!allowEmpty && trimmed.length === 0) return undefined;
  return trimmed.length > max ? `${trimmed.slice(0, max)}…` : trimmed;
}

function optionalString(obj: Json, key: string, max: number): string | undefined | null {
  if (!(key in obj) || obj[key] === undefined || obj[key] === null) return undefined;
  const value = boundedString(obj[key], max, true);
  if (value === undefined) return null; // present but not a string: bad shape
  return value.length > 0 ? value : undefined;
}

function parseSource(value: unknown): ResearchSource | null {
  if (!isObject(value)) return null;
  const title = boundedString(value.title, LIMITS.title);
  const citation = boundedString(value.citation, LIMITS.citation);
  const excerpt = boundedString(value.excerpt, LIMITS.excerpt, true);
  if (title === undefined || citation === undefined || excerpt === undefined) return null;
  const date = optionalString(value, 'date', LIMITS.meta);
  const gaceta = optionalString(value, 'gaceta', LIMITS.meta);
  const name = optionalString(value, 'official_source_name', LIMITS.meta);
  const rawUrl = optionalString(value, 'official_source_url', LIMITS.url);
  if (date === null || gaceta === null || name === null || rawUrl === null) return null;
  const source: ResearchSource = { title, citation, excerpt };
  if (date) source.date = date;
  if (gaceta) source.gaceta = gaceta;
  if (name) source.officialSourceName = name;
  const url = safeHttpUrl(rawUrl);
  if (url) source.officialSourceUrl = url;
  return source;
}

function isTurn(value: unknown): value is number {
  return typeof value === 'number' && Number.isInteger(value) && value >= 0;
}

/**
 * A string within `max` characters, or undefined. Not cut to fit like the panel's texts: `said` is looked up in
 * the transcript, so a shortened copy would not be found, and the worker never sends one longer.
 */
function exactString(value: unknown, max: number): string | undefined {
  if (typeof value !== 'string') return undefined;
  const trimmed = value.trim();
  return trimmed.length > 0 && Array.from(trimmed).length <= max ? trimmed : undefined;
}

/** A field that may be null (or absent): null, the string, or undefined when it is anything else. */
function nullableString(obj: Json, key: string, max: number): string | null | undefined {
  const value = obj[key];
  return value === undefined || value === null ? null : exactString(value, max);
}

function parseCitationChecked(data: Json): CitationMessage | null {
  const turn = data.turn;
  const said = exactString(data.said, LIMITS.said);
  const article = exactString(data.article, LIMITS.article);
  const norm = nullableString(data, 'norm', LIMITS.norm);
  const source = nullableString(data, 'source', LIMITS.citation);
  const callId = nullableString(data, 'call_id', LIMITS.callId);
  const verified = data.verified;
  if (!isTurn(turn) || typeof verified !== 'boolean') return null;
  if (said === undefined || article === undefined || norm === undefined) return null;
  if (source === undefined || callId === undefined) return null;
  return { type: 'citation_checked', callId, turn, said, article, norm, verified, source };
}

/** One message from its wire form, or null for anything that is not a well-formed v1 message. */
export function parseResearchMessage(payload: string | Uint8Array): ResearchMessage | null {
  const data = parseJsonObject(payload, MAX_MESSAGE_CHARS);
  if (data === null || data.v !== PROTOCOL_VERSION) return null;
  // Not about one search: its call_id may be null (no delivered source holds the citation).
  if (data.type === 'citation_checked') return parseCitationChecked(data);
  const callId = boundedString(data.call_id, LIMITS.callId);
  const turn = data.turn;
  if (callId === undefined || !isTurn(turn)) return null;

  switch (data.type) {
    case 'started': {
      const query = boundedString(data.query, LIMITS.query);
      return query === undefined ? null : { type: 'started', callId, turn, query };
    }
    case 'completed': {
      const duration = data.tool_duration_ms;
      if (typeof duration !== 'number' || !Number.isFinite(duration) || duration < 0) return null;
      if (!Array.isArray(data.sources)) return null;
      const sources: ResearchSource[] = [];
      for (const raw of data.sources.slice(0, MAX_SOURCES)) {
        const source = parseSource(raw);
        if (source === null) return null;
        sources.push(source);
      }
      return { type: 'completed', callId, turn, toolDurationMs: duration, sources };
    }
    case 'failed': {
      const reason = boundedString(data.reason, LIMITS.reason);
      return reason === undefined ? null : { type: 'failed', callId, turn, reason };
    }
    case 'discarded':
      return { type: 'discarded', callId, turn };
    default:
      return null;
  }
}

function sameCheck(a: CitationCheck, b: CitationMessage): boolean {
  return (
    a.turn === b.turn &&
    a.said === b.said &&
    a.article === b.article &&
    a.norm === b.norm &&
    a.verified === b.verified &&
    a.source === b.source &&
    a.callId === b.callId
  );
}

function applyCitation(state: ResearchState, message: CitationMessage): ResearchState {
  const citations = state.citations ?? [];
  // The same check again (the worker saw the same words twice): one mark is enough.
  if (citations.some((c) => sameCheck(c, message))) return state;
  const { type: _type, ...fields } = message;
  const seq = (citations[citations.length - 1]?.seq ?? 0) + 1;
  return { ...state, citations: [...citations, { ...fields, seq }].slice(-MAX_CITATIONS) };
}

/** Fold one parsed message into the state; a finished search never goes back to "running". */
export function applyResearchMessage(state: ResearchState, message: ResearchMessage): ResearchState {
  if (message.type === 'citation_checked') return applyCitation(state, message);
  const existing = state.entries.find((e) => e.callId === message.callId);
  const base: ResearchEntry = existing ?? {
    callId: message.callId,
    turn: message.turn,
    status: 'running',
    sources: [],
  };
  let next: ResearchEntry;
  switch (message.type) {
    case 'started':
      if (existing && existing.status !== 'running') {
        next = existing.query ? existing : { ...existing, query: message.query };
      } else {
        next = { ...base, query: message.query, status: 'running' };
      }
      break;
    case 'completed':
      next = { ...base, status: 'completed', sources: message.sources, toolDurationMs: message.toolDurationMs };
      break;
    case 'failed':
      next = { ...base, status: 'failed', reason: message.reason, sources: [] };
      break;
    case 'discarded':
      next = { ...base, status: 'discarded', sources: [] };
      break;
  }
  if (next === existing) return state;
  const others = state.entries.filter((e) => e.callId !== message.callId);
  const entries = existing
    ? state.entries.map((e) => (e.callId === message.callId ? next : e))
    : [next, ...others].slice(0, MAX_ENTRIES);
  const lastOutcome = message.type === 'completed' || message.type === 'failed' ? message.callId : state.lastOutcome;
  return { ...state, entries, lastOutcome };
}

export function researchReducer(state: ResearchState, action: ResearchAction): ResearchState {
  switch (action.type) {
    case 'reset':
      return initialResearchState;
    case 'agentGone':
    case 'sessionEnded': {
      // No outcome can come any more: a search left "running" would spin on the page for good.
      const interruption: InterruptionReason = action.type === 'agentGone' ? 'agent_left' : 'session_ended';
      const ended = state.ended === true || action.type === 'sessionEnded';
      const running = state.entries.find((e) => e.status === 'running');
      if (!running && ended === (state.ended === true)) return state;
      return {
        ...state,
        ended,
        entries: running
          ? state.entries.map((e) => (e.status === 'running' ? { ...e, status: 'interrupted', interruption } : e))
          : state.entries,
        lastOutcome: running ? running.callId : state.lastOutcome,
      };
    }
    case 'received': {
      if (!isAgentSender(action.sender)) return state;
      const message = parseResearchMessage(action.payload);
      return message ? applyResearchMessage(state, message) : state;
    }
  }
}

/**
 * The one short line a screen reader hears when a search ends (the panel's polite live region), never the
 * excerpts themselves: "3 fuentes encontradas", or why there are none. Null while it runs or once discarded.
 */
export function researchAnnouncement(entry: ResearchEntry | undefined): string | null {
  switch (entry?.status) {
    case 'completed': {
      const n = entry.sources.length;
      if (n === 0) return 'No se encontraron fuentes';
      return n === 1 ? '1 fuente encontrada' : `${n} fuentes encontradas`;
    }
    case 'failed':
      return failureText(entry.reason ?? '');
    case 'interrupted':
      return interruptionText(entry.interruption);
    default:
      return null;
  }
}

/**
 * The card a verified citation links to: the source delivered by its `callId` whose citation is its `source`.
 * Null when it is not verified or that card is not on the page (an old search dropped from the list).
 */
export function citedSource(
  entries: readonly ResearchEntry[],
  citation: Pick<CitationCheck, 'verified' | 'callId' | 'source'>,
): { callId: string; index: number } | null {
  if (!citation.verified || citation.callId === null || citation.source === null) return null;
  const entry = entries.find((e) => e.callId === citation.callId && e.status === 'completed');
  const index = entry ? entry.sources.findIndex((s) => s.citation === citation.source) : -1;
  return entry && index >= 0 ? { callId: entry.callId, index } : null;
}

/**
 * The DOM id of a source card: the call id written out so that any call id gives a valid id and no two give the
 * same one (every character but letters, digits and "-" becomes "_hex_").
 */
export function sourceCardId(callId: string, index: number): string {
  const safe = Array.from(callId, (ch) => (/^[A-Za-z0-9-]$/.test(ch) ? ch : `_${ch.codePointAt(0)!.toString(16)}_`));
  return `fuente-${safe.join('')}-${index}`;
}

/** "123 ms" for the tool's own time; seconds with one decimal past ten seconds. */
export function formatDuration(ms: number): string {
  if (ms >= 10_000) return `${(ms / 1000).toFixed(1).replace('.', ',')} s`;
  return `${Math.round(ms)} ms`;
}
