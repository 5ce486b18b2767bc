/**
 * What every message the agent sends the page has in common (`lexvoz.research`, `lexvoz.speech`): only the agent
 * participant may send one, and its wire form is one bounded JSON object. One copy of these rules, so the topics
 * cannot drift apart on who is trusted or on what is parsed at all.
 */
import { ParticipantKind } from 'livekit-client';

/** Who sent a message: the participant's kind as LiveKit reports it (undefined when unknown). */
export interface AgentSender {
  kind?: ParticipantKind;
}

/** Only the agent participant may send these messages: a person in the room must not fake evidence or marks. */
export function isAgentSender(sender: AgentSender | undefined): boolean {
  return sender?.kind === ParticipantKind.AGENT;
}

export type JsonObject = Record<string, unknown>;

export function isJsonObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function decode(payload: string | Uint8Array): string | null {
  if (typeof payload === 'string') return payload;
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(payload);
  } catch {
    return null;
  }
}

/**
 * The payload as a JSON object, or null when it is longer than `maxChars`, not valid UTF-8, not JSON, or not an
 * object. A payload too large to hold `maxChars` characters in any encoding is refused before it is decoded.
 */
export function parseJsonObject(payload: string | Uint8Array, maxChars: number): JsonObject | null {
  if (payload.length > maxChars * 4) return null;
  const text = decode(payload);
  if (text === null || text.length > maxChars) return null;
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch {
    return null;
  }
  return isJsonObject(data) ? data : null;
}
