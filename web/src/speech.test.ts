import { ParticipantKind } from 'livekit-client';
import { describe, expect, it } from 'vitest';

import { parseSpeechMessage } from './speech';

const agent = { kind: ParticipantKind.AGENT };
const encode = (value: unknown) => new TextEncoder().encode(JSON.stringify(value));

describe('lexvoz.speech messages', () => {
  it('reads the agent saying its speech was cut off, as bytes or as text', () => {
    expect(parseSpeechMessage(agent, encode({ v: 1, type: 'interrupted' }))).toEqual({ type: 'interrupted' });
    expect(parseSpeechMessage(agent, '{"v":1,"type":"interrupted"}')).toEqual({ type: 'interrupted' });
  });

  it('takes it only from the agent participant', () => {
    const message = encode({ v: 1, type: 'interrupted' });
    expect(parseSpeechMessage({ kind: ParticipantKind.STANDARD }, message)).toBeNull();
    expect(parseSpeechMessage({}, message)).toBeNull();
    expect(parseSpeechMessage(undefined, message)).toBeNull();
  });

  it('drops another version, an unknown type, and anything that is not a small JSON object', () => {
    expect(parseSpeechMessage(agent, encode({ v: 2, type: 'interrupted' }))).toBeNull();
    expect(parseSpeechMessage(agent, encode({ type: 'interrupted' }))).toBeNull();
    expect(parseSpeechMessage(agent, encode({ v: 1, type: 'started' }))).toBeNull();
    expect(parseSpeechMessage(agent, encode(null))).toBeNull();
    expect(parseSpeechMessage(agent, 'interrupted')).toBeNull();
    expect(parseSpeechMessage(agent, encode({ v: 1, type: 'interrupted', pad: 'x'.repeat(2_000) }))).toBeNull();
  });
});
