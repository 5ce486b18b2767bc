import { describe, expect, it } from 'vitest';

import { buildTranscript, isLineFinal, latestAgentLine, type RawLine } from './transcript';

let clock = 0;
function spoken(speaker: RawLine['speaker'], text: string, finalAttribute?: string): RawLine {
  clock += 1;
  return { id: `t-${clock}`, speaker, text, timestamp: clock, typed: false, finalAttribute };
}
function typed(speaker: RawLine['speaker'], text: string): RawLine {
  clock += 1;
  return { id: `c-${clock}`, speaker, text, timestamp: clock, typed: true };
}
const finals = (lines: RawLine[], state: Parameters<typeof buildTranscript>[1]) =>
  buildTranscript(lines, state).map((l) => [l.text, l.final]);

describe('isLineFinal: agent lines', () => {
  const streamed = { speaker: 'agent' as const, typed: false, finalAttribute: 'false' };

  it('is final once the agent stopped speaking, although the stream opened with final=false', () => {
    // The e2e bug: the "true" only comes when the stream closes, which nothing re-renders on.
    expect(isLineFinal(streamed, false, 'listening')).toBe(true);
    expect(isLineFinal(streamed, false, 'thinking')).toBe(true);
    expect(isLineFinal(streamed, false, 'idle')).toBe(true);
  });

  it('is in progress only while it is the newest agent line and the agent is speaking', () => {
    expect(isLineFinal(streamed, false, 'speaking')).toBe(false);
    expect(isLineFinal(streamed, true, 'speaking')).toBe(true);
  });

  it('trusts an explicit final=true even while speaking', () => {
    expect(isLineFinal({ ...streamed, finalAttribute: 'true' }, false, 'speaking')).toBe(true);
  });
});

describe('isLineFinal: user lines', () => {
  it('follows the STT final attribute', () => {
    expect(isLineFinal({ speaker: 'user', typed: false, finalAttribute: 'false' }, false, 'listening')).toBe(false);
    expect(isLineFinal({ speaker: 'user', typed: false, finalAttribute: 'true' }, false, 'listening')).toBe(true);
    expect(isLineFinal({ speaker: 'user', typed: false }, false, 'listening')).toBe(true);
  });

  it('is final once a newer user line exists, even if its final never arrived', () => {
    expect(isLineFinal({ speaker: 'user', typed: false, finalAttribute: 'false' }, true, 'listening')).toBe(true);
  });

  it('typed lines are always final', () => {
    expect(isLineFinal({ speaker: 'user', typed: true }, false, 'speaking')).toBe(true);
    expect(isLineFinal({ speaker: 'agent', typed: true }, false, 'speaking')).toBe(true);
  });
});

describe('buildTranscript', () => {
  it('un-greys the finished agent answer when the agent goes back to listening', () => {
    const lines = [spoken('user', '¿Qué dice el artículo 1?', 'true'), spoken('agent', 'El artículo 1 dice…', 'false')];
    expect(finals(lines, 'speaking')).toEqual([
      ['¿Qué dice el artículo 1?', true],
      ['El artículo 1 dice…', false],
    ]);
    expect(finals(lines, 'listening')).toEqual([
      ['¿Qué dice el artículo 1?', true],
      ['El artículo 1 dice…', true],
    ]);
  });

  it('only the newest agent line is in progress while speaking', () => {
    const lines = [spoken('agent', 'Hola.', 'false'), spoken('user', 'Hola', 'true'), spoken('agent', 'Bien…', 'false')];
    expect(finals(lines, 'speaking')).toEqual([
      ['Hola.', true],
      ['Hola', true],
      ['Bien…', false],
    ]);
  });

  it('a just-opened, still empty agent line already makes the previous one final, and is not shown', () => {
    const lines = [spoken('agent', 'Primera respuesta.', 'false'), spoken('agent', '', 'false')];
    expect(finals(lines, 'speaking')).toEqual([['Primera respuesta.', true]]);
  });

  it('a user interim left without its final is final once the user says something newer', () => {
    const lines = [spoken('user', 'primera frase', 'false'), spoken('user', 'segunda', 'false')];
    expect(finals(lines, 'listening')).toEqual([
      ['primera frase', true],
      ['segunda', false],
    ]);
    expect(finals([lines[0]!, typed('user', 'escrita')], 'listening')).toEqual([
      ['primera frase', true],
      ['escrita', true],
    ]);
  });

  it('sorts by time and drops blank lines', () => {
    const a = spoken('agent', 'dos', 'true');
    const b = spoken('user', 'uno', 'true');
    const blank = typed('user', '   ');
    expect(buildTranscript([{ ...a, timestamp: 10 }, { ...b, timestamp: 5 }, blank], 'listening').map((l) => l.text)).toEqual([
      'uno',
      'dos',
    ]);
  });
});

describe('interrupted agent lines', () => {
  it('the line a cut-off message is about is the newest spoken agent line, whatever its state', () => {
    const greeting = spoken('agent', 'Hola, soy Lexvoz.', 'true');
    const question = typed('user', '¿Idioma oficial?');
    const answer = spoken('agent', 'Modo', 'false');
    expect(latestAgentLine([greeting, question, answer])).toBe(answer.id);
    // Its final may already be in (the framework closes the stream as it cuts it): still that line.
    expect(latestAgentLine([answer, greeting, { ...question, timestamp: 0 }])).toBe(answer.id);
    // The person's lines and the agent's typed lines are not its speech.
    expect(latestAgentLine([greeting, question, spoken('user', 'oiga', 'false'), typed('agent', 'texto')])).toBe(
      greeting.id,
    );
    expect(latestAgentLine([question])).toBeNull();
    expect(latestAgentLine([])).toBeNull();
  });

  it('marks a line the worker reported as cut off once it is final, as interrupted, and no other', () => {
    const greeting = spoken('agent', 'Hola, soy Lexvoz.', 'true');
    const question = typed('user', '¿Idioma oficial?');
    const answer = spoken('agent', 'Modo', 'false');
    const cut = new Set([answer.id]);
    const marks = (state: Parameters<typeof buildTranscript>[1], extra: RawLine[] = []) =>
      buildTranscript([greeting, question, answer, ...extra], state, cut).map((l) => [l.text, l.interrupted]);
    // Still being said (the agent has not stopped yet): no mark yet.
    expect(marks('speaking')).toEqual([
      ['Hola, soy Lexvoz.', false],
      ['¿Idioma oficial?', false],
      ['Modo', false],
    ]);
    // The agent stopped: the fragment is all that was said, and reads as cut.
    expect(marks('thinking')).toEqual([
      ['Hola, soy Lexvoz.', false],
      ['¿Idioma oficial?', false],
      ['Modo', true],
    ]);
    // The next answer, spoken in full, carries no mark.
    const next = spoken('agent', 'Modo de ensayo. Encontré 3 fuentes.', 'false');
    expect(marks('listening', [typed('user', 'otra'), next]).map(([, i]) => i)).toEqual([false, false, true, false, false]);
  });

  it('without a cut line, nothing is marked (the default)', () => {
    const lines = [spoken('agent', 'Modo', 'true')];
    expect(buildTranscript(lines, 'listening').map((l) => l.interrupted)).toEqual([false]);
  });
});
