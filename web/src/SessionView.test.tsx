/**
 * SessionView with @livekit/components-react's hooks played by a double: the line the agent reports as cut
 * off is marked as interrupted, the agent's mode reaches the page, and reduced motion leaves out the visualiser.
 */
import { act, cleanup, fireEvent, render, screen } from '@testing-library/react';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';

import { ParticipantKind, RoomEvent } from 'livekit-client';

import { SessionView } from './SessionView';
import { SPEECH_TOPIC } from './speech';

const h = vi.hoisted(() => ({
  state: 'speaking' as string,
  transcriptions: [] as unknown[],
  send: vi.fn(async (_text: string) => undefined),
  renders: [] as { children?: import('react').ReactNode }[],
  dataHandlers: new Set<(...args: unknown[]) => void>(),
}));

vi.mock('@livekit/components-react', async () => {
  const { livekitComponentsDouble } = await import('./testDoubles');
  return livekitComponentsDouble(h.renders, {
    BarVisualizer: () => <div data-testid="bars" />,
    useVoiceAssistant: () => ({
      state: h.state,
      agent: { identity: 'agente' },
      audioTrack: undefined,
      agentAttributes: { 'lexvoz.mode': 'rehearsal' },
    }),
    useTranscriptions: () => h.transcriptions,
    useChat: () => ({ send: h.send, chatMessages: [], isSending: false }),
    useRoomContext: () => room,
  });
});

/** The room as SessionView sees it: only its data packets matter here. */
const room = {
  on: (event: string, handler: (...args: unknown[]) => void) => {
    if (event === RoomEvent.DataReceived) h.dataHandlers.add(handler);
    return room;
  },
  off: (event: string, handler: (...args: unknown[]) => void) => {
    if (event === RoomEvent.DataReceived) h.dataHandlers.delete(handler);
    return room;
  },
};

const AGENT = { identity: 'agente', kind: ParticipantKind.AGENT };
const PERSON = { identity: 'otra', kind: ParticipantKind.STANDARD };
const CUT = JSON.stringify({ v: 1, type: 'interrupted' });

/** A data packet reaching the room, as livekit-client hands it to DataReceived listeners. */
function receive(text: string, from: object | null = AGENT, topic = SPEECH_TOPIC) {
  act(() => {
    for (const handler of h.dataHandlers) handler(new TextEncoder().encode(text), from ?? undefined, undefined, topic);
  });
}

/** An agent transcription as useTranscriptions hands it over, opened with final=false. */
function agentLine(id: string, text: string, timestamp: number, final = 'false') {
  return {
    text,
    participantInfo: { identity: 'agente' },
    streamInfo: { id, timestamp, attributes: { 'lk.transcription_final': final, 'lk.segment_id': id } },
  };
}

async function typeAndSend(text: string) {
  fireEvent.change(screen.getByTestId('chat-input'), { target: { value: text } });
  await act(async () => {
    fireEvent.click(screen.getByTestId('chat-send'));
  });
}

const view = (props: Partial<Parameters<typeof SessionView>[0]> = {}) => (
  <SessionView connected token="tok" {...props} />
);

beforeEach(() => {
  h.state = 'speaking';
  h.send.mockClear();
});
afterEach(cleanup);

describe('SessionView: a line the agent reports as cut off', () => {
  it('marks the newest agent line "(interrumpido)" once the agent stops, and only that line', () => {
    // The person spoke over the answer: nothing was typed, the worker says the speech was cut.
    h.transcriptions = [agentLine('greet', 'Hola, soy Lexvoz.', 1, 'true'), agentLine('ans', 'Modo', 2)];
    const { rerender } = render(view());
    receive(CUT);
    expect(screen.queryByTestId('line-interrupted')).toBeNull(); // the agent has not stopped yet

    h.state = 'listening';
    rerender(view());
    const marks = screen.getAllByTestId('line-interrupted');
    expect(marks).toHaveLength(1);
    expect(marks[0]!.closest('li')?.textContent).toBe('LexvozModo … (interrumpido)');

    // The next answer, said in full, carries no mark; a second cut marks it too.
    h.transcriptions = [...h.transcriptions, agentLine('next', 'Modo de ensayo.', 3)];
    rerender(view());
    expect(screen.getAllByTestId('line-interrupted')).toHaveLength(1);
    receive(CUT);
    expect(screen.getAllByTestId('line-interrupted')).toHaveLength(2);
  });

  it('does not guess from typing: a question sent while the agent speaks marks nothing by itself', async () => {
    h.transcriptions = [agentLine('ans', 'Modo de ensayo. Encontré 3 fuentes.', 2)];
    const { rerender } = render(view());
    await typeAndSend('gracias'); // the line had in fact just finished; the worker sends no message
    expect(h.send).toHaveBeenCalledWith('gracias');
    h.state = 'listening';
    rerender(view());
    expect(screen.queryByTestId('line-interrupted')).toBeNull();

    receive(CUT); // had it been cut, the worker would have said so
    expect(screen.getAllByTestId('line-interrupted')).toHaveLength(1);
  });

  it('ignores the message from anyone but the agent, on another topic, or not of this protocol', () => {
    h.state = 'listening';
    h.transcriptions = [agentLine('ans', 'Modo', 2, 'true')];
    render(view());
    receive(CUT, PERSON);
    receive(CUT, null); // a sender livekit-client could not name
    receive(CUT, AGENT, 'lexvoz.research');
    receive(JSON.stringify({ v: 2, type: 'interrupted' }));
    receive(JSON.stringify({ v: 1, type: 'resumed' }));
    receive('no es JSON');
    expect(screen.queryByTestId('line-interrupted')).toBeNull();
  });

  it('stops listening when it unmounts', () => {
    h.transcriptions = [];
    const { unmount } = render(view());
    expect(h.dataHandlers.size).toBe(1);
    unmount();
    expect(h.dataHandlers.size).toBe(0);
  });
});

describe('SessionView: mode and motion', () => {
  it('tells the page the mode the agent announced', () => {
    h.transcriptions = [];
    const onMode = vi.fn();
    render(view({ onMode }));
    expect(onMode).toHaveBeenCalledWith('rehearsal');
  });

  it('leaves the audio visualiser out under reduced motion', () => {
    h.transcriptions = [];
    const { rerender } = render(view());
    expect(screen.queryByTestId('bars')).not.toBeNull();
    rerender(view({ reducedMotion: true }));
    expect(screen.queryByTestId('bars')).toBeNull();
  });
});
