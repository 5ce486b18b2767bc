/**
 * SessionView with @livekit/components-react's hooks played by a double: what the person typed over is
 * marked as interrupted, the agent's mode reaches the page, and reduced motion leaves out the visualiser.
 */
import { act, cleanup, fireEvent, render, screen } from '@testing-library/react';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';

import { SessionView } from './SessionView';

const h = vi.hoisted(() => ({
  state: 'speaking' as string,
  transcriptions: [] as unknown[],
  send: vi.fn(async (_text: string) => undefined),
  renders: [] as { children?: import('react').ReactNode }[],
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
  });
});

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

describe('SessionView: a line the person typed over', () => {
  it('is marked "(interrumpido)" once the agent stops, and only that line', async () => {
    h.transcriptions = [agentLine('greet', 'Hola, soy Lexvoz.', 1, 'true'), agentLine('ans', 'Modo', 2)];
    const { rerender } = render(view());
    await typeAndSend('¿otra pregunta?');
    expect(h.send).toHaveBeenCalledWith('¿otra pregunta?');
    expect(screen.queryByTestId('line-interrupted')).toBeNull(); // the agent has not stopped yet

    h.state = 'thinking';
    rerender(view());
    const marks = screen.getAllByTestId('line-interrupted');
    expect(marks).toHaveLength(1);
    expect(marks[0]!.closest('li')?.textContent).toBe('LexvozModo … (interrumpido)');
  });

  it('is not marked when the agent had finished it (its final arrived) before the person typed', async () => {
    const answer = agentLine('ans', 'Modo de ensayo. Encontré 3 fuentes.', 2);
    h.transcriptions = [answer];
    const { rerender } = render(view());
    // livekit-client updates the stream's attributes in place when its trailer arrives, with no new render.
    answer.streamInfo.attributes['lk.transcription_final'] = 'true';
    await typeAndSend('gracias');
    h.state = 'listening';
    rerender(view());
    expect(screen.queryByTestId('line-interrupted')).toBeNull();
  });

  it('is not marked when the person typed while the agent was listening', async () => {
    h.state = 'listening';
    h.transcriptions = [agentLine('ans', 'Modo de ensayo.', 2)];
    render(view());
    await typeAndSend('gracias');
    expect(screen.queryByTestId('line-interrupted')).toBeNull();
  });

  it('is not marked when the question could not be sent', async () => {
    h.transcriptions = [agentLine('ans', 'Modo', 2)];
    h.send.mockRejectedValueOnce(new Error('offline'));
    const { rerender } = render(view());
    await typeAndSend('¿otra?');
    h.state = 'listening';
    rerender(view());
    expect(screen.queryByTestId('line-interrupted')).toBeNull();
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
