/**
 * SessionView with @livekit/components-react's hooks played by a double: the line the agent reports as cut
 * off is marked as interrupted, the agent's mode reaches the page, and reduced motion leaves out the visualiser.
 */
import { act, cleanup, fireEvent, render, screen } from '@testing-library/react';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';

import { ParticipantKind, RoomEvent } from 'livekit-client';

import type { CitationView } from './citations';
import { frozenTranscript, NO_TRANSCRIPT, SessionView, type ShownTranscript } from './SessionView';
import { SPEECH_TOPIC } from './speech';

const h = vi.hoisted(() => ({
  state: 'speaking' as string,
  attributes: { 'lexvoz.mode': 'rehearsal' } as Record<string, string>,
  transcriptions: [] as unknown[],
  send: vi.fn(async (_text: string) => undefined),
  renders: [] as { children?: import('react').ReactNode }[],
  dataHandlers: new Set<(...args: unknown[]) => void>(),
  published: [] as { payload: Uint8Array; options: Record<string, unknown> }[],
}));

vi.mock('@livekit/components-react', async () => {
  const { livekitComponentsDouble } = await import('./testDoubles');
  return livekitComponentsDouble(h.renders, {
    BarVisualizer: () => <div data-testid="bars" />,
    useVoiceAssistant: () => ({
      state: h.state,
      agent: { identity: 'agente' },
      audioTrack: undefined,
      agentAttributes: h.attributes,
    }),
    useTranscriptions: () => h.transcriptions,
    useChat: () => ({ send: h.send, chatMessages: [], isSending: false }),
    useRoomContext: () => room,
  });
});

/** The room as SessionView sees it: its name, its data packets, and what the page publishes. */
const room = {
  name: 'sala-prueba',
  localParticipant: {
    publishData: async (payload: Uint8Array, options: Record<string, unknown>) => {
      h.published.push({ payload, options });
    },
  },
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
  h.attributes = { 'lexvoz.mode': 'rehearsal' };
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

describe("SessionView: the page's hello to the agent", () => {
  it('is sent once to the agent that joined, reliably on its topic, saying the person is new here', () => {
    window.sessionStorage.clear();
    h.published.length = 0;
    const { rerender } = render(view());
    rerender(view());
    expect(h.published).toHaveLength(1);
    const { payload, options } = h.published[0]!;
    expect(JSON.parse(new TextDecoder().decode(payload))).toEqual({ v: 1, type: 'hello', resumed: false });
    expect(options).toEqual({ reliable: true, topic: 'lexvoz.page', destinationIdentities: ['agente'] });
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

describe('SessionView: citation checks in the transcript', () => {
  /** A person's line as useTranscriptions hands it over. */
  function userLine(id: string, text: string, timestamp: number) {
    return {
      text,
      participantInfo: { identity: 'usuario' },
      streamInfo: { id, timestamp, attributes: { 'lk.transcription_final': 'true' } },
    };
  }
  const check = (over: Partial<CitationView>): CitationView => ({
    seq: 1,
    turn: 1,
    said: 'articulo 75 de la constitucion',
    article: '75',
    norm: 'constitucion',
    verified: false,
    source: null,
    callId: null,
    ...over,
  });

  it("marks an unverified citation next to its words in the reply it arrived during, and keeps it there", () => {
    h.state = 'speaking';
    h.transcriptions = [
      agentLine('old', 'Antes hablé del artículo 75 de la Constitución.', 1, 'true'),
      userLine('q', '¿Y ahora?', 2),
      agentLine('ans', 'Según el Artículo 75 de la Constitución, sí.', 3),
    ];
    const first = [check({})];
    const { rerender } = render(view({ citations: first }));
    const mark = screen.getByTestId('citation-unverified');
    expect(mark.closest('li')?.textContent).toBe(
      'LexvozSegún el Artículo 75 de la Constitución ⚠ (artículo 75 de la Constitución: no verificado en las fuentes), sí.',
    );

    // The person asks again and the agent answers: the mark stays on the reply of its turn.
    h.state = 'listening';
    h.transcriptions = [...h.transcriptions, userLine('q2', 'Gracias', 4), agentLine('next', 'El artículo 75 de la Constitución…', 5)];
    rerender(view({ citations: [...first] }));
    const marks = screen.getAllByTestId('citation-unverified');
    expect(marks).toHaveLength(1);
    expect(marks[0]!.closest('li')?.textContent).toContain('Según el Artículo 75');
  });

  it("marks a citation whose words it cannot find at the end of the agent's latest line", () => {
    h.state = 'speaking';
    h.transcriptions = [userLine('q', '¿Qué dice?', 1), agentLine('ans', 'Lo dice el setenta y cinco.', 2)];
    render(view({ citations: [check({})] }));
    expect(screen.getByTestId('citation-unverified').closest('li')?.textContent).toBe(
      'LexvozLo dice el setenta y cinco. ⚠ (artículo 75 de la Constitución: no verificado en las fuentes)',
    );
  });

  it('links the words of a verified citation to its card, and links nothing without a card', () => {
    h.state = 'speaking';
    h.transcriptions = [userLine('q', '¿Qué dice?', 1), agentLine('ans', 'Según el artículo 75 de la Constitución, sí.', 2)];
    const verified = check({ verified: true, source: 'Constitución, artículo 75', callId: 'c1' });
    const { rerender } = render(view({ citations: [verified] }));
    expect(screen.queryByTestId('citation-link')).toBeNull();
    expect(screen.queryByTestId('citation-unverified')).toBeNull();
    rerender(view({ citations: [{ ...verified, cardId: 'fuente-c1-0' }] }));
    const link = screen.getByTestId('citation-link');
    expect(link.getAttribute('href')).toBe('#fuente-c1-0');
    expect(link.textContent).toBe('artículo 75 de la Constitución (ver la fuente)');
  });
});

describe("SessionView: an earlier room's transcript, after a rejoin", () => {
  it('shows it above this room, with its marks, and places only the checks of this room in it', () => {
    h.state = 'speaking';
    const userLine = (id: string, text: string, timestamp: number) => ({
      text,
      participantInfo: { identity: 'usuario' },
      streamInfo: { id, timestamp, attributes: { 'lk.transcription_final': 'true' } },
    });
    // The earlier room: a reply marked unverified, then the line in progress when livekit-server went away.
    h.transcriptions = [userLine('q1', '¿Qué dice el 75?', 1), agentLine('a1', 'Según el artículo 75 de la Constitución, sí.', 2)];
    const first = { seq: 1, turn: 1, said: 'articulo 75 de la constitucion', article: '75', norm: 'constitucion' };
    const check = { ...first, verified: false, source: null, callId: null };
    let shown: ShownTranscript = NO_TRANSCRIPT;
    const onShown = (s: ShownTranscript) => {
      shown = s;
    };
    const { rerender } = render(view({ citations: [check], onShown }));
    h.transcriptions = [...h.transcriptions, userLine('q2', '¿Y el 76?', 3), agentLine('a2', 'El artículo 76 dice', 4)];
    rerender(view({ citations: [check], onShown }));
    expect(screen.getAllByTestId('citation-unverified')).toHaveLength(1);
    cleanup();

    // The new room: its agent counts turns afresh (its first turn is 1 again) and says the same words.
    h.transcriptions = [userLine('q3', '¿Y el 75 otra vez?', 10), agentLine('a3', 'El artículo 75 de la Constitución lo dice.', 11)];
    const again = { ...check, seq: 2 };
    render(view({ citations: [again], earlier: frozenTranscript(shown) }));
    const lines = [...screen.getByTestId('transcript').querySelectorAll('li.line')];
    expect(lines.map((li) => li.querySelector('.line-text')?.textContent?.slice(0, 12))).toEqual([
      '¿Qué dice el',
      'Según el art',
      '¿Y el 76?',
      'El artículo ',
      '¿Y el 75 otr',
      'El artículo ',
    ]);
    expect(lines[3]!.className).not.toContain('line-interim'); // as far as it got: no longer in progress
    const marks = screen.getAllByTestId('citation-unverified');
    expect(marks.map((m) => m.closest('li'))).toEqual([lines[1], lines[5]]);
  });
});

describe('SessionView: an agent whose sign of life stopped', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('is reported lost once, 10 s after its last refresh, and no longer shown speaking', async () => {
    vi.useFakeTimers();
    h.attributes = { 'lexvoz.mode': 'rehearsal', 'lexvoz.heartbeat': '1800000000000' };
    const onAgentLost = vi.fn();
    render(view({ onAgentLost }));
    expect(screen.getByTestId('agent-state').textContent).toBe('hablando');
    await act(async () => {
      await vi.advanceTimersByTimeAsync(9_999);
    });
    expect(onAgentLost).not.toHaveBeenCalled();
    await act(async () => {
      await vi.advanceTimersByTimeAsync(1);
    });
    expect(onAgentLost).toHaveBeenCalledTimes(1); // the research panel ends its running search with it
    expect(screen.getByTestId('agent-state').textContent).toBe('conectando');
    await act(async () => {
      await vi.advanceTimersByTimeAsync(60_000);
    });
    expect(onAgentLost).toHaveBeenCalledTimes(1);
  });
});
