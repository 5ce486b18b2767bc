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
