import { describe, expect, it } from 'vitest';

import { agentStateLabel } from './labels';

describe('agentStateLabel', () => {
  it('names the four states the person sees most in Spanish', () => {
    expect(agentStateLabel('connecting')).toBe('conectando');
    expect(agentStateLabel('listening')).toBe('escuchando');
    expect(agentStateLabel('thinking')).toBe('pensando');
    expect(agentStateLabel('speaking')).toBe('hablando');
    expect(agentStateLabel(undefined)).toBe('inactivo');
  });
});
