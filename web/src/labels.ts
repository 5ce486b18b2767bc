/** Spanish words for the agent's state, as the person sees them. */
import type { AgentState } from '@livekit/components-react';

const AGENT_STATE_LABELS: Record<AgentState, string> = {
  disconnected: 'desconectado',
  connecting: 'conectando',
  'pre-connect-buffering': 'conectando',
  initializing: 'conectando',
  idle: 'en espera',
  listening: 'escuchando',
  thinking: 'pensando',
  speaking: 'hablando',
  failed: 'sin respuesta del agente',
};

export function agentStateLabel(state: AgentState | undefined): string {
  return state === undefined ? 'inactivo' : (AGENT_STATE_LABELS[state] ?? 'conectando');
}

/** The participant attribute the agent sets to say whether its answers come from OpenAI or a local simulator. */
export const MODE_ATTRIBUTE = 'lexvoz.mode';

/** Where the person's voice and questions go: OpenAI (`live`) or the local simulator (`rehearsal`). */
export type AgentMode = 'rehearsal' | 'live';

/** The mode an agent announced in `lexvoz.mode`; undefined when it said nothing (or something unknown). */
export function agentMode(value: string | undefined): AgentMode | undefined {
  return value === 'rehearsal' || value === 'live' ? value : undefined;
}

/** The participant attribute the agent sets when it ends the conversation itself, naming why. */
export const END_REASON_ATTRIBUTE = 'lexvoz.end_reason';

const END_REASON_MESSAGES: Record<string, string> = {
  max_duration:
    'La conversación terminó porque alcanzó su duración máxima. Puede iniciar una nueva cuando quiera.',
};

/** What to tell the person when the agent ended the conversation; null when it did not (or said nothing). */
export function endReasonMessage(reason: string | undefined): string | null {
  if (!reason) return null;
  return END_REASON_MESSAGES[reason] ?? 'El agente terminó la conversación. Puede iniciar una nueva.';
}

/**
 * The agent state to show for a session. useVoiceAssistant says "disconnected" before the room has even
 * started connecting, so until this session's room has connected (`connectedThisSession`) everything reads
 * "connecting"; "disconnected" only shows after a connection existed and was lost. `undefined` (no session)
 * stays `undefined`.
 */
export function displayAgentState(
  state: AgentState | undefined,
  connectedThisSession: boolean,
): AgentState | undefined {
  if (state === undefined) return undefined;
  return connectedThisSession ? state : 'connecting';
}
