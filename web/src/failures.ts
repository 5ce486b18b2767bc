/**
 * What the page says when the agent loses its voice model.
 *
 * The agent keeps two attributes on its participant: `lexvoz.model` (connecting | connected |
 * reconnecting | failed) and, once it has failed, `lexvoz.failure` with the cause. It sets them before it
 * leaves the room, so the page listens to attribute changes as they arrive (not to a later render, by
 * which time the agent may be gone) and turns the cause into a Spanish sentence that says what happened
 * and what the person can do.
 */
import type { AgentState } from '@livekit/components-react';
import { ParticipantKind, RoomEvent, type Participant, type Room } from 'livekit-client';

export const MODEL_ATTRIBUTE = 'lexvoz.model';
export const FAILURE_ATTRIBUTE = 'lexvoz.failure';

export type ModelFailureCause =
  | 'invalid_key'
  | 'forbidden'
  | 'unknown_model'
  | 'quota'
  | 'unreachable'
  | 'dropped'
  | 'model_error';

export const MODEL_FAILURE_MESSAGES: Record<ModelFailureCause, string> = {
  invalid_key: 'El servicio de voz rechazó la clave configurada; avise al administrador.',
  forbidden: 'El servicio de voz no permite usar el modelo configurado con esta clave; avise al administrador.',
  unknown_model: 'El servicio de voz no reconoce el modelo configurado; avise al administrador.',
  quota:
    'El servicio de voz alcanzó su límite de uso. Inténtelo de nuevo en unos minutos; si continúa, avise al administrador.',
  unreachable:
    'No se pudo conectar con el servicio de voz. Pulse «Empezar» para intentarlo de nuevo; si continúa, avise al administrador.',
  dropped:
    'Se perdió la conexión con el servicio de voz y no se pudo recuperar. Pulse «Empezar» para intentarlo de nuevo.',
  model_error: 'El servicio de voz falló. Pulse «Empezar» para intentarlo de nuevo; si continúa, avise al administrador.',
};

type Attributes = Readonly<Record<string, string>> | undefined;

/** The Spanish sentence for a failed model link, or null while the link has not failed. */
export function modelFailureMessage(attributes: Attributes): string | null {
  if (attributes?.[MODEL_ATTRIBUTE] !== 'failed') return null;
  const cause = attributes[FAILURE_ATTRIBUTE] ?? '';
  return Object.hasOwn(MODEL_FAILURE_MESSAGES, cause)
    ? MODEL_FAILURE_MESSAGES[cause as ModelFailureCause]
    : MODEL_FAILURE_MESSAGES.model_error;
}

/**
 * The state to show, given what the agent says about its model: never "escuchando" (or any working state)
 * while no model is connected. An agent that does not publish the attribute keeps its own state.
 */
export function withModelLink(state: AgentState | undefined, attributes: Attributes): AgentState | undefined {
  const link = attributes?.[MODEL_ATTRIBUTE];
  if (state === undefined || link === undefined || link === 'connected') return state;
  if (link === 'failed') return 'failed';
  return state === 'disconnected' ? state : 'connecting';
}

function isAgent(participant: Participant | undefined): boolean {
  return participant?.kind === ParticipantKind.AGENT;
}

/** Calls `onFailure(message)` once when an agent in `room` reports a failed model; returns the undo. */
export function watchModelFailure(room: Room, onFailure: (message: string) => void): () => void {
  let reported = false;
  const check = (participant: Participant | undefined) => {
    if (reported || !isAgent(participant)) return;
    const message = modelFailureMessage(participant?.attributes);
    if (message === null) return;
    reported = true;
    onFailure(message);
  };
  const onChanged = (_changed: Record<string, string>, participant: Participant) => check(participant);
  room.on(RoomEvent.ParticipantAttributesChanged, onChanged);
  for (const participant of room.remoteParticipants.values()) check(participant);
  return () => {
    room.off(RoomEvent.ParticipantAttributesChanged, onChanged);
  };
}
