import { ParticipantKind, RoomEvent, type Participant, type Room } from 'livekit-client';
import { describe, expect, it, vi } from 'vitest';

import { agentStateLabel } from './labels';
import { MODEL_FAILURE_MESSAGES, modelFailureMessage, watchModelFailure, withModelLink } from './failures';

type Listener = (changed: Record<string, string>, participant: Participant) => void;

/** Just the part of Room the watcher uses: attribute events and the participants already there. */
function fakeRoom(present: Participant[] = []) {
  const listeners = new Set<Listener>();
  const room = {
    remoteParticipants: new Map(present.map((p) => [p.identity, p])),
    on: (event: RoomEvent, cb: Listener) => {
      expect(event).toBe(RoomEvent.ParticipantAttributesChanged);
      listeners.add(cb);
      return room;
    },
    off: (_event: RoomEvent, cb: Listener) => {
      listeners.delete(cb);
      return room;
    },
  };
  const emit = (participant: Participant) => {
    for (const cb of [...listeners]) cb({}, participant);
  };
  return { room: room as unknown as Room, emit, listeners };
}

function participant(kind: ParticipantKind, attributes: Record<string, string>): Participant {
  return { identity: `p-${kind}`, kind, attributes } as unknown as Participant;
}

describe('modelFailureMessage', () => {
  it('says in Spanish what happened to the key, and what to do', () => {
    expect(modelFailureMessage({ 'lexvoz.model': 'failed', 'lexvoz.failure': 'invalid_key' })).toBe(
      'El servicio de voz rechazó la clave configurada; avise al administrador.',
    );
  });

  it('has a sentence for every cause the worker sends, each with what the person can do', () => {
    for (const cause of ['invalid_key', 'forbidden', 'unknown_model', 'quota', 'unreachable', 'dropped', 'model_error']) {
      const message = modelFailureMessage({ 'lexvoz.model': 'failed', 'lexvoz.failure': cause });
      expect(message).toBe(MODEL_FAILURE_MESSAGES[cause as keyof typeof MODEL_FAILURE_MESSAGES]);
      expect(message).toMatch(/avise al administrador|Pulse «Empezar»|Inténtelo/);
    }
  });

  it('falls back to a generic sentence for an unknown cause, and says nothing while the link works', () => {
    expect(modelFailureMessage({ 'lexvoz.model': 'failed', 'lexvoz.failure': 'toString' })).toBe(
      MODEL_FAILURE_MESSAGES.model_error,
    );
    expect(modelFailureMessage({ 'lexvoz.model': 'connected' })).toBeNull();
    expect(modelFailureMessage(undefined)).toBeNull();
  });
});

describe('withModelLink', () => {
  it('never shows "escuchando" while no model is connected', () => {
    for (const link of ['connecting', 'reconnecting']) {
      expect(agentStateLabel(withModelLink('listening', { 'lexvoz.model': link }))).toBe('conectando');
    }
    expect(agentStateLabel(withModelLink('listening', { 'lexvoz.model': 'failed' }))).not.toBe('escuchando');
    expect(agentStateLabel(withModelLink('listening', { 'lexvoz.model': 'connected' }))).toBe('escuchando');
  });

  it('leaves the state alone for an agent that does not report its model, or with no session', () => {
    expect(withModelLink('listening', {})).toBe('listening');
    expect(withModelLink(undefined, { 'lexvoz.model': 'connecting' })).toBeUndefined();
  });
});

describe('watchModelFailure', () => {
  const failed = { 'lexvoz.model': 'failed', 'lexvoz.failure': 'quota' };

  it('reports the failure of the agent once, as soon as its attributes change', () => {
    const { room, emit } = fakeRoom();
    const onFailure = vi.fn();
    watchModelFailure(room, onFailure);
    emit(participant(ParticipantKind.AGENT, { 'lexvoz.model': 'connecting' }));
    expect(onFailure).not.toHaveBeenCalled();
    emit(participant(ParticipantKind.AGENT, failed));
    emit(participant(ParticipantKind.AGENT, failed));
    expect(onFailure).toHaveBeenCalledTimes(1);
    expect(onFailure).toHaveBeenCalledWith(MODEL_FAILURE_MESSAGES.quota);
  });

  it('ignores the same attributes from a participant that is not an agent', () => {
    const { room, emit } = fakeRoom();
    const onFailure = vi.fn();
    watchModelFailure(room, onFailure);
    emit(participant(ParticipantKind.STANDARD, failed));
    expect(onFailure).not.toHaveBeenCalled();
  });

  it('reports an agent that had already failed when the watch began, and stops listening on undo', () => {
    const { room, listeners } = fakeRoom([participant(ParticipantKind.AGENT, failed)]);
    const onFailure = vi.fn();
    const undo = watchModelFailure(room, onFailure);
    expect(onFailure).toHaveBeenCalledTimes(1);
    undo();
    expect(listeners.size).toBe(0);
  });
});
