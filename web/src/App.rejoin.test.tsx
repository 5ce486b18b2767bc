/**
 * App when livekit-server shuts down under a conversation (livekit-client reports SERVER_SHUTDOWN): the page
 * joins the same room again by itself, with its resume token, says so as a status while it does, retries while
 * livekit-server is not back, keeps the research panel, and tells the person the session ended only when the
 * window passes or the room went away for another reason.
 *
 * Mocked at the module boundaries only, as in App.agentWait.test.tsx: `acquireMicrophone`, `fetch`,
 * livekit-client's `Room` and @livekit/components-react.
 */
import { act, cleanup, fireEvent, render, screen } from '@testing-library/react';
import type { ReactNode } from 'react';
import { DisconnectReason } from 'livekit-client';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';

import { App, REJOIN_PAUSE_MS, REJOIN_WITHIN_MS, REJOINING_MESSAGE } from './App';

interface LiveKitRoomProps {
  token?: string;
  onConnected?: () => void;
  onDisconnected?: (reason?: number) => void;
  onError?: (error: Error) => void;
  children?: ReactNode;
}

// `chat`: what the room's chat holds, as useChat gives it (each room's SessionView reads it when it renders).
const h = vi.hoisted(() => ({ liveKitRoomRenders: [] as LiveKitRoomProps[], chat: [] as unknown[] }));

vi.mock('./session', async (importOriginal) => {
  const actual = await importOriginal<typeof import('./session')>();
  return { ...actual, acquireMicrophone: vi.fn(async () => ({ ok: false, message: 'sin micrófono' })) };
});

vi.mock('livekit-client', async (importOriginal) => {
  const actual = await importOriginal<typeof import('livekit-client')>();
  const { connectedRoomClass } = await import('./testDoubles');
  return { ...actual, Room: connectedRoomClass(actual, vi.fn) };
});

// No agent ever joins: what is tested is the room's connection, not the conversation in it.
vi.mock('@livekit/components-react', async () => {
  const { livekitComponentsDouble } = await import('./testDoubles');
  return livekitComponentsDouble(h.liveKitRoomRenders, {
    useVoiceAssistant: () => ({ state: 'connecting', agent: undefined, audioTrack: undefined, agentAttributes: {} }),
    useChat: () => ({ send: vi.fn(), chatMessages: h.chat, isSending: false }),
  });
});

const ENDED = 'La sesión terminó. Pulse «Empezar» para iniciar otra.';

function json(status: number, body: unknown): Response {
  return new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json' } });
}

// How long the service says a resume token lives, and the renewals it answered (POST /api/session/renew).
const RESUME_TTL_S = 600;
let sessions: number;
let renewals: number;
let fetchMock: ReturnType<typeof vi.fn<(input: RequestInfo | URL, init?: RequestInit) => Promise<Response>>>;

/** What POST /api/session (or another path) was sent, in order: the resume token each time, if any. */
function sessionRequests(path = '/api/session'): (string | undefined)[] {
  return fetchMock.mock.calls
    .filter(([url]) => url === path)
    .map(([, init]) => (JSON.parse(String(init?.body ?? '{}')) as { resume?: string }).resume);
}

const lastRoom = () => h.liveKitRoomRenders.at(-1)!;

async function settle() {
  await act(async () => {
    for (let i = 0; i < 5; i++) await Promise.resolve();
  });
}

async function advance(ms: number) {
  await act(async () => {
    await vi.advanceTimersByTimeAsync(ms);
  });
}

async function startAndConnect() {
  render(<App />);
  fireEvent.click(screen.getByTestId('start-button'));
  await settle();
  await act(async () => lastRoom().onConnected?.());
}

beforeEach(() => {
  vi.useFakeTimers({ shouldAdvanceTime: true });
  h.liveKitRoomRenders.length = 0;
  h.chat = [];
  window.sessionStorage.clear();
  sessions = 0;
  renewals = 0;
  fetchMock = vi.fn(async (input: RequestInfo | URL) => {
    if (input === '/api/session/renew') {
      renewals += 1;
      return json(200, { resume: `renewed-${renewals}`, resume_ttl_s: RESUME_TTL_S });
    }
    if (input !== '/api/session') return json(404, {});
    sessions += 1;
    return json(200, {
      url: 'ws://127.0.0.1:7880',
      token: `tok-${sessions}`,
      room: 'sala',
      identity: 'usuario',
      resume: `res-${sessions}`,
      resume_ttl_s: RESUME_TTL_S,
    });
  });
  vi.stubGlobal('fetch', fetchMock);
});

afterEach(() => {
  cleanup();
  vi.useRealTimers();
  vi.unstubAllGlobals();
});

describe('App: livekit-server shuts down under a conversation', () => {
  it('joins the same room again with its resume token, saying so meanwhile, and not that the session ended', async () => {
    await startAndConnect();
    expect(sessionRequests()).toEqual([undefined]);
    await act(async () => lastRoom().onDisconnected?.(DisconnectReason.SERVER_SHUTDOWN));
    expect(screen.getByTestId('session-notice').textContent).toBe(REJOINING_MESSAGE);
    expect(screen.getByTestId('session-notice').getAttribute('role')).toBe('status');
    expect(screen.queryByTestId('session-error')).toBeNull();
    expect(screen.queryByTestId('start-button')).toBeNull(); // nothing for the person to press

    await advance(REJOIN_PAUSE_MS);
    await settle();
    expect(sessionRequests()).toEqual([undefined, 'res-1']); // this tab's room, as after a reload
    expect(lastRoom().token).toBe('tok-2');
    await act(async () => lastRoom().onConnected?.());
    expect(screen.queryByTestId('session-notice')).toBeNull();
    expect(screen.queryByTestId('session-error')).toBeNull();
    expect(screen.getByTestId('stop-button')).toBeTruthy();
  });

  it('tries again while livekit-server is not back, then stops once it is in the room', async () => {
    await startAndConnect();
    await act(async () => lastRoom().onDisconnected?.(DisconnectReason.SERVER_SHUTDOWN));
    for (let attempt = 2; attempt <= 4; attempt++) {
      await advance(REJOIN_PAUSE_MS);
      await settle();
      expect(lastRoom().token).toBe(`tok-${attempt}`);
      // the connection is refused: livekit-server is still starting
      await act(async () => lastRoom().onError?.(new Error('could not establish signal connection')));
      expect(screen.getByTestId('session-notice').textContent).toBe(REJOINING_MESSAGE);
      expect(screen.queryByTestId('session-error')).toBeNull();
    }
    await advance(REJOIN_PAUSE_MS);
    await settle();
    await act(async () => lastRoom().onConnected?.());
    expect(screen.queryByTestId('session-notice')).toBeNull();
    expect(sessionRequests()).toEqual([undefined, 'res-1', 'res-2', 'res-3', 'res-4']);
  });

  it('tells the person the session ended once the window passes without livekit-server', async () => {
    await startAndConnect();
    await act(async () => lastRoom().onDisconnected?.(DisconnectReason.SERVER_SHUTDOWN));
    const deadline = Date.now() + REJOIN_WITHIN_MS;
    while (Date.now() < deadline + 2 * REJOIN_PAUSE_MS && screen.queryByTestId('session-error') === null) {
      await advance(REJOIN_PAUSE_MS);
      await settle();
      const room = lastRoom();
      await act(async () => room.onDisconnected?.(DisconnectReason.UNKNOWN_REASON));
    }
    expect(screen.getByTestId('session-error').textContent).toBe(ENDED);
    expect(screen.queryByTestId('session-notice')).toBeNull();
    expect(screen.getByTestId('start-button')).toBeTruthy();
    const tries = sessionRequests().length;
    await advance(10 * REJOIN_PAUSE_MS);
    expect(sessionRequests()).toHaveLength(tries); // and stops trying
  });

  it('does not rejoin a room it was removed from, or one that ended for any reason but a server shutdown', async () => {
    for (const reason of [DisconnectReason.PARTICIPANT_REMOVED, DisconnectReason.ROOM_DELETED, DisconnectReason.CLIENT_INITIATED]) {
      cleanup();
      h.liveKitRoomRenders.length = 0;
      await startAndConnect();
      const before = sessionRequests().length;
      await act(async () => lastRoom().onDisconnected?.(reason));
      await advance(5 * REJOIN_PAUSE_MS);
      expect(screen.getByTestId('session-error').textContent).toBe(ENDED);
      expect(sessionRequests()).toHaveLength(before);
    }
  });

  it('stops rejoining when the person presses Stop', async () => {
    await startAndConnect();
    await act(async () => lastRoom().onDisconnected?.(DisconnectReason.SERVER_SHUTDOWN));
    fireEvent.click(screen.getByTestId('stop-button'));
    await advance(5 * REJOIN_PAUSE_MS);
    expect(sessionRequests()).toEqual([undefined]);
    expect(screen.queryByTestId('session-notice')).toBeNull();
    expect(screen.getByTestId('start-button')).toBeTruthy();
  });

  it('comes back to its own room after a conversation longer than the resume token it joined with lives', async () => {
    await startAndConnect();
    // Renewed at half its life while in the room, each time with the token the last renewal gave.
    await advance((RESUME_TTL_S * 1_000) / 2);
    await settle();
    expect(sessionRequests('/api/session/renew')).toEqual(['res-1']);
    await advance((RESUME_TTL_S * 1_000) / 2);
    await settle();
    await advance(RESUME_TTL_S * 1_000 * 0.2); // past the first token's life
    expect(sessionRequests('/api/session/renew')).toEqual(['res-1', 'renewed-1']);

    await act(async () => lastRoom().onDisconnected?.(DisconnectReason.SERVER_SHUTDOWN));
    await advance(REJOIN_PAUSE_MS);
    await settle();
    expect(sessionRequests()).toEqual([undefined, 'renewed-2']); // a fresh token: the same room, not a new one
  });

  it('renews nothing before the room connects, while it rejoins, or after Stop', async () => {
    render(<App />);
    fireEvent.click(screen.getByTestId('start-button'));
    await settle();
    await advance(RESUME_TTL_S * 1_000);
    expect(sessionRequests('/api/session/renew')).toEqual([]); // never connected
    await act(async () => lastRoom().onConnected?.());
    await act(async () => lastRoom().onDisconnected?.(DisconnectReason.SERVER_SHUTDOWN));
    await advance(RESUME_TTL_S * 1_000);
    expect(sessionRequests('/api/session/renew')).toEqual([]); // rejoining, not in the room
    fireEvent.click(screen.getByTestId('stop-button'));
    await advance(2 * RESUME_TTL_S * 1_000);
    expect(sessionRequests('/api/session/renew')).toEqual([]);
  });

  it('keeps the conversation on screen across the rejoin, above the lines of the new room, until Stop', async () => {
    const said = (id: string, at: number, message: string, isLocal: boolean) => ({ id, timestamp: at, message, from: { isLocal } });
    const shown = () => [...screen.getByTestId('transcript').querySelectorAll('li.line')].map((li) => li.textContent);
    h.chat = [said('q', 1_000, '¿Qué dice el artículo 7?', true), said('a', 2_000, 'Encontré 1 fuente: artículo 7.', false)];
    await startAndConnect();
    const before = shown();
    expect(before).toEqual(['Usted (escrito)¿Qué dice el artículo 7?', 'Lexvoz (escrito)Encontré 1 fuente: artículo 7.']);

    h.chat = []; // the new room's chat starts empty
    await act(async () => lastRoom().onDisconnected?.(DisconnectReason.SERVER_SHUTDOWN));
    expect(shown()).toEqual(before); // still there while the page reconnects
    await advance(REJOIN_PAUSE_MS);
    await settle();
    expect(shown()).toEqual(before);
    h.chat = [said('back', 9_000, 'Ya volví, pero sin lo que hablamos.', false)];
    await act(async () => lastRoom().onConnected?.());
    expect(shown()).toEqual([...before, 'Lexvoz (escrito)Ya volví, pero sin lo que hablamos.']);

    fireEvent.click(screen.getByTestId('stop-button'));
    await settle();
    h.chat = [];
    fireEvent.click(screen.getByTestId('start-button'));
    await settle();
    expect(shown()).toEqual([]); // a new conversation starts with an empty transcript
  });
});
