import { cleanup, render, screen } from '@testing-library/react';
import { afterEach, describe, expect, it } from 'vitest';

import { agentMode } from './labels';
import { PrivacyNotice } from './PrivacyNotice';

afterEach(cleanup);

const voice = () => screen.getByTestId('privacy-voice').textContent ?? '';

describe('PrivacyNotice', () => {
  it('in live mode, says the voice and the questions go to OpenAI', () => {
    render(<PrivacyNotice mode="live" />);
    expect(voice()).toBe('Su voz y lo que escriba se envían a OpenAI para transcribirlos y responder.');
  });

  it('in rehearsal mode, says they stay with the local simulator and do not go to OpenAI', () => {
    render(<PrivacyNotice mode="rehearsal" />);
    expect(voice()).toContain('modo de ensayo');
    expect(voice()).toContain('simulador local en este servidor, no a OpenAI');
    expect(voice()).not.toContain('se envían a OpenAI');
  });

  it('before any agent said its mode, names both places and claims neither', () => {
    render(<PrivacyNotice />);
    expect(voice()).not.toContain('se envían a OpenAI');
    expect(voice()).toContain('OpenAI');
    expect(voice()).toContain('simulador local');
    expect(screen.getByTestId('privacy-notice').textContent).toContain('Al pulsar «Empezar» se abre su micrófono.');
  });

  it('reads the mode only from the values the agent sends', () => {
    expect(agentMode('rehearsal')).toBe('rehearsal');
    expect(agentMode('live')).toBe('live');
    expect(agentMode('otro')).toBeUndefined();
    expect(agentMode(undefined)).toBeUndefined();
  });
});
