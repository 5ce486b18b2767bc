/**
 * App's notices while no agent has joined, end to end through Start, the room connecting, and the page
 * asking `POST /api/agent` for an agent:
 *  - a status (data-testid agent-waiting) while it asks, an alert (agent-timeout) once it gives up or the
 *    session is no longer valid, with the exact Spanish texts;
 *  - the session's own token is what it sends, and nothing is sent once an agent is there, after an
 *    announced end, or after Stop.
 *
 * Mocked at the module boundaries only, as in App.microphone.test.tsx: `acquireMicrophone`, `fetch`,
 * livekit-client's `Room` and @livekit/components-react (whose agent is driven from the test).
 */
import { act, cleanup, fireEvent, render, screen } from '@testing-library/react';
import type { ReactNode } from 'react';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';

import { App } from './App';
import { acquireMicrophone } from './session';

const WAITING_TEXT =
  'Ningún agente está libre en este momento. Le atenderemos en cuanto uno quede libre; puede esperar aquí.';
const UNAVAILABLE_TEXT = 'No hay ningún agente disponible. Pulse Detener e inténtelo de nuevo más tarde.';
const INVALID_TEXT = 'La sesión ya no es válida. Pulse Detener y empiece de nuevo.';

interface LiveKitRoomProps {
  onConnected?: () => void;
  children?: ReactNode;
}

interface AgentView {
  agent: object | undefined;
  agentAttributes: Record<string, string>;
  state?: string; // what the agent's `lk.agent.state` says while it is listed ('listening' when not given)
}

const h = vi.hoisted(() => ({
  liveKitRoomRenders: [] as LiveKitRoomProps[],
  view: { agent: undefined, agentAttributes: {} } as AgentView,
  listeners: new Set<() => void>(),
}));

/** What useVoiceAssistant reports from now on; components using it re-render. */
function setAgent(view: AgentView) {
  h.view = view;
  for (const fn of [...h.listeners]) fn();
}

vi.mock('./session', async (importOriginal) => {
  const actual = await importOriginal<typeof import('./session')>();
  return { ...actual, acquireMicrophone: vi.fn(async () => ({ ok: false, message: 'sin micrófono' })) };
});

vi.mock('livekit-client', async (importOriginal) => {
  const actual = await importOriginal<typeof import('livekit-client')>();
  const { connectedRoomClass } = await import('./testDoubles');
  return { ...actual, Room: connectedRoomClass(actual, vi.fn) };
});

vi.mock('@livekit/components-react', async () => {
  const { useSyncExternalStore } = await import('react');
  const { livekitComponentsDouble } = await import('./testDoubles');
  const subscribe = (fn: () => void) => {
    h.listeners.add(fn);
    return () => h.listeners.delete(fn);
  };
  return livekitComponentsDouble(h.liveKitRoomRenders, {
    useVoiceAssistant: () => {
      const view = useSyncExternalStore(subscribe, () => h.view);
      const state = view.agent ? (view.state ?? 'listening') : 'connecting';
      return { audioTrack: undefined, ...view, state };
    },
    useChat: () => ({ send: vi.fn(), chatMessages: [], isSending: false }),
  });
});

const SESSION = { url: 'ws://127.0.0.1:7880', token: 'tok-de-la-sesion', room: 'sala', identity: 'usuario' };

function json(status: number, body: unknown, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json', ...headers } });
}

let agentAnswer: () => Response;
let fetchMock: ReturnType<typeof vi.fn<(input: RequestInfo | URL, init?: RequestInit) => Promise<Response>>>;

function agentCalls() {
  return fetchMock.mock.calls.filter(([url]) => url === '/api/agent');
}

/** Start a session and let its room connect; fake timers from then on. */
async function startAndConnect() {
  render(<App />);
  fireEvent.click(screen.getByTestId('start-button'));
  await act(async () => {
    for (let i = 0; i < 5; i++) await new Promise((r) => setTimeout(r, 0));
  });
  vi.useFakeTimers();
  await act(async () => h.liveKitRoomRenders.at(-1)!.onConnected?.());
}

async function advance(ms: number) {
  await act(async () => {
    await vi.advanceTimersByTimeAsync(ms);
  });
}

beforeEach(() => {
  h.liveKitRoomRenders.length = 0;
  h.view = { agent: undefined, agentAttributes: {} };
  window.sessionStorage.clear();
  agentAnswer = () => json(202, { agent: 'requested', retry_after_s: 5 });
  fetchMock = vi.fn(async (input: RequestInfo | URL) =>
    input === '/api/agent' ? agentAnswer() : json(200, SESSION),
  );
  vi.stubGlobal('fetch', fetchMock);
});

afterEach(() => {
  cleanup();
  vi.useRealTimers();
  vi.unstubAllGlobals();
});

describe('App: no agent has joined yet', () => {
  it('asks for one with the session token after 8.5 s and says, as a status, that it is waiting', async () => {
    await startAndConnect();
    expect(acquireMicrophone).toHaveBeenCalled();
    await advance(8_499);
    expect(agentCalls()).toHaveLength(0);
    expect(screen.queryByTestId('agent-waiting')).toBeNull();

    await advance(1);
    expect(agentCalls()).toHaveLength(1);
    const init = agentCalls()[0]![1]!;
    expect(init.method).toBe('POST');
    expect(new Headers(init.headers).get('Authorization')).toBe(`Bearer ${SESSION.token}`);

    const notice = screen.getByTestId('agent-waiting');
    expect(notice.textContent).toBe(WAITING_TEXT);
    expect(notice.getAttribute('role')).toBe('status');
    expect(screen.queryByTestId('agent-timeout')).toBeNull();
    expect(document.body.textContent).not.toMatch(/worker/i);
    // The session stays usable while it waits.
    expect((screen.getByTestId('chat-input') as HTMLInputElement).disabled).toBe(false);
  });

  it('drops the notice the moment the agent joins, and asks no more', async () => {
    await startAndConnect();
    await advance(9_000);
    expect(screen.getByTestId('agent-waiting')).toBeTruthy();

    act(() => setAgent({ agent: { identity: 'agente' }, agentAttributes: {} }));
    expect(screen.queryByTestId('agent-waiting')).toBeNull();
    await advance(15 * 60_000);
    expect(agentCalls()).toHaveLength(1);
    expect(screen.queryByTestId('agent-waiting')).toBeNull();
    expect(screen.queryByTestId('agent-timeout')).toBeNull();
  });

  it('says, as an alert, that the session is no longer valid when the service refuses it', async () => {
    agentAnswer = () => json(404, { error: 'la sala ya no existe' });
    await startAndConnect();
    await advance(9_000);

    const notice = screen.getByTestId('agent-timeout');
    expect(notice.textContent).toBe(INVALID_TEXT);
    expect(notice.getAttribute('role')).toBe('alert');
    expect(screen.queryByTestId('agent-waiting')).toBeNull();
    await advance(60_000);
    expect(agentCalls()).toHaveLength(1);
  });

  it('says, as an alert, that no agent is available after 10 minutes', async () => {
    await startAndConnect();
    await advance(10 * 60_000);

    const notice = screen.getByTestId('agent-timeout');
    expect(notice.textContent).toBe(UNAVAILABLE_TEXT);
    expect(notice.getAttribute('role')).toBe('alert');
    expect(screen.queryByTestId('agent-waiting')).toBeNull();
    expect(document.body.textContent).not.toMatch(/worker/i);
    const sent = agentCalls().length;
    await advance(10 * 60_000);
    expect(agentCalls()).toHaveLength(sent);
  });

  it('Stop ends the requests', async () => {
    await startAndConnect();
    await advance(9_000);
    expect(agentCalls()).toHaveLength(1);
    fireEvent.click(screen.getByTestId('stop-button'));
    await advance(15 * 60_000);
    expect(agentCalls()).toHaveLength(1);
    expect(screen.queryByTestId('agent-waiting')).toBeNull();
  });

  it('never asks for another agent after the agent ended the conversation itself', async () => {
    await startAndConnect();
    act(() => setAgent({ agent: { identity: 'agente' }, agentAttributes: { 'lexvoz.end_reason': 'max_duration' } }));
    act(() => setAgent({ agent: undefined, agentAttributes: {} })); // it said goodbye and left
    await advance(15 * 60_000);
    expect(agentCalls()).toHaveLength(0);
    expect(screen.getByTestId('agent-ended')).toBeTruthy();
    expect(screen.queryByTestId('agent-waiting')).toBeNull();
    expect(screen.queryByTestId('agent-timeout')).toBeNull();
  });
});

describe('App: an agent whose sign of life stopped (its worker died; LiveKit still lists it)', () => {
  const BEAT = 'lexvoz.heartbeat';
  const speaking = (beat: string | undefined, identity = 'agente') =>
    setAgent({ agent: { identity }, agentAttributes: beat === undefined ? {} : { [BEAT]: beat }, state: 'speaking' });
  const agentState = () => screen.getByTestId('agent-state').textContent;

  it('is shown as gone 10 s after its last refresh arrived, and another is asked for, naming it', async () => {
    await startAndConnect();
    act(() => speaking('1800000000000'));
    expect(agentState()).toBe('hablando');
    await advance(9_999);
    expect(agentState()).toBe('hablando');
    expect(agentCalls()).toHaveLength(0);

    await advance(1); // no refresh for 10 s: what the page shows once an agent has left
    expect(agentState()).toBe('conectando');
    await advance(5_000); // the same waiting as for an agent that left
    expect(agentCalls()).toHaveLength(1);
    expect(JSON.parse(agentCalls()[0]![1]!.body as string)).toEqual({ left: 'agente' });
    expect(screen.getByTestId('agent-waiting').textContent).toBe(WAITING_TEXT);

    // The service removed it and dispatched another: the new agent ends the waiting.
    act(() => speaking('1800000020000', 'agente-nuevo'));
    expect(agentState()).toBe('hablando');
    expect(screen.queryByTestId('agent-waiting')).toBeNull();
    await advance(9_000);
    expect(agentCalls()).toHaveLength(1);
  });

  it('keeps an agent whose refreshes arrive in time, and asks for nothing', async () => {
    await startAndConnect();
    for (let i = 0; i < 40; i++) {
      act(() => speaking(String(1_800_000_000_000 + i * 3_000)));
      await advance(3_000);
    }
    expect(agentState()).toBe('hablando');
    expect(agentCalls()).toHaveLength(0);
  });

  it('never judges an agent that sends no sign of life (a worker from before it)', async () => {
    await startAndConnect();
    act(() => speaking(undefined));
    await advance(10 * 60_000);
    expect(agentState()).toBe('hablando');
    expect(agentCalls()).toHaveLength(0);
    expect(screen.queryByTestId('agent-waiting')).toBeNull();
  });

  it('comes back if a refresh arrives after all, and the asking stops', async () => {
    await startAndConnect();
    act(() => speaking('1'));
    await advance(10_000);
    expect(agentState()).toBe('conectando');
    await advance(5_000);
    expect(agentCalls()).toHaveLength(1); // the service saw its sign of life fresh and answered "present"
    act(() => speaking('2'));
    expect(agentState()).toBe('hablando');
    await advance(9_000);
    expect(agentCalls()).toHaveLength(1);
  });
});
