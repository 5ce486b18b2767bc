import { describe, expect, it } from 'vitest';

import { agentStateLabel, displayAgentState, END_REASON_ATTRIBUTE, endReasonMessage } from './labels';

describe('agentStateLabel', () => {
  it('names the four states the person sees most in Spanish', () => {
    expect(agentStateLabel('connecting')).toBe('conectando');
    expect(agentStateLabel('listening')).toBe('escuchando');
    expect(agentStateLabel('thinking')).toBe('pensando');
    expect(agentStateLabel('speaking')).toBe('hablando');
    expect(agentStateLabel(undefined)).toBe('inactivo');
  });
});

describe('displayAgentState', () => {
  it('shows "conectando", not "desconectado", before this session has connected', () => {
    // useVoiceAssistant reports "disconnected" before the room starts connecting.
    expect(agentStateLabel(displayAgentState('disconnected', false))).toBe('conectando');
    expect(agentStateLabel(displayAgentState('connecting', false))).toBe('conectando');
  });

  it('a Start goes inactivo → conectando → escuchando with no "desconectado" in between', () => {
    const shown = [
      displayAgentState(undefined, false),
      displayAgentState('connecting', false),
      displayAgentState('disconnected', false),
      displayAgentState('connecting', false),
      displayAgentState('connecting', true),
      displayAgentState('listening', true),
    ].map(agentStateLabel);
    expect(shown).not.toContain('desconectado');
    expect([...new Set(shown)]).toEqual(['inactivo', 'conectando', 'escuchando']);
  });

  it('shows "desconectado" once a connection existed and was lost', () => {
    expect(agentStateLabel(displayAgentState('disconnected', true))).toBe('desconectado');
  });

  it('passes the agent state through once connected, and keeps "no session" as inactivo', () => {
    expect(displayAgentState('speaking', true)).toBe('speaking');
    expect(displayAgentState(undefined, true)).toBeUndefined();
  });
});

describe('endReasonMessage', () => {
  it('tells the person in Spanish that the conversation reached its maximum length', () => {
    expect(END_REASON_ATTRIBUTE).toBe('lexvoz.end_reason');
    expect(endReasonMessage('max_duration')).toMatch(/duración máxima/);
  });

  it('says nothing while the agent has not ended the conversation', () => {
    expect(endReasonMessage(undefined)).toBeNull();
    expect(endReasonMessage('')).toBeNull();
  });

  it('still explains an end reason it does not know', () => {
    expect(endReasonMessage('otra')).toMatch(/terminó la conversación/);
  });
});
