/**
 * App's microphone handling, end to end through its own Start/Stop logic:
 *  - a permission prompt answered after Stop releases the track and does not revive the session;
 *  - a refused permission shows a Spanish notice (data-testid mic-error) and typed questions still work;
 * and, through the same fake room, what the research panel shows when the agent leaves mid-search, and where the
 * worker's citation checks show, in the transcript and the panel.
 *
 * Mocked at the module boundaries only: `acquireMicrophone` (so the prompt can be held open), `fetch`
 * (the token service), livekit-client's `Room` (no network) and @livekit/components-react (LiveKitRoom
 * and the hooks that need a real room). Everything in App.tsx and the rest of session.ts runs for real.
 */
import { act, cleanup, fireEvent, render, screen } from '@testing-library/react';
import { ParticipantKind, RoomEvent, type LocalAudioTrack } from 'livekit-client';
import type { ReactNode } from 'react';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';

import { App } from './App';
import { acquireMicrophone, type MicrophoneResult } from './session';

interface FakeRoom {
  state: string;
  disconnect: ReturnType<typeof vi.fn>;
  localParticipant: {
    trackPublications: Map<string, { track?: { stop: () => void } }>;
    publishTrack: ReturnType<typeof vi.fn>;
  };
  simulateConnected(): void;
  emit(event: string, ...args: unknown[]): void;
}

interface LiveKitRoomProps {
  serverUrl: string;
  token: string;
  connect: boolean;
  onConnected?: () => void;
  children?: ReactNode;
}

const h = vi.hoisted(() => ({
  rooms: [] as FakeRoom[],
  liveKitRoomRenders: [] as LiveKitRoomProps[],
  send: vi.fn(async (_text: string) => undefined),
  transcriptions: [] as unknown[],
  realAcquireMicrophone: null as unknown as () => Promise<unknown>,
}));

vi.mock('./session', async (importOriginal) => {
  const actual = await importOriginal<typeof import('./session')>();
  h.realAcquireMicrophone = actual.acquireMicrophone;
  return { ...actual, acquireMicrophone: vi.fn(actual.acquireMicrophone) };
});

vi.mock('livekit-client', async (importOriginal) => {
  const actual = await importOriginal<typeof import('livekit-client')>();
  class Room {
    state: string = actual.ConnectionState.Disconnected;
    remoteParticipants = new Map();
    localParticipant = { trackPublications: new Map(), publishTrack: vi.fn(async () => undefined) };
    disconnect = vi.fn(async () => undefined);
    private handlers = new Map<string, Set<(...args: unknown[]) => void>>();
    constructor() {
      h.rooms.push(this as unknown as FakeRoom);
    }
    on(event: string, fn: (...args: unknown[]) => void) {
      if (!this.handlers.has(event)) this.handlers.set(event, new Set());
      this.handlers.get(event)!.add(fn);
      return this;
    }
    off(event: string, fn: (...args: unknown[]) => void) {
      this.handlers.get(event)?.delete(fn);
      return this;
    }
    registerTextStreamHandler() {}
    unregisterTextStreamHandler() {}
    simulateConnected() {
      this.state = actual.ConnectionState.Connected;
      this.emit(actual.RoomEvent.Connected);
    }
    emit(event: string, ...args: unknown[]) {
      for (const fn of [...(this.handlers.get(event) ?? [])]) fn(...args);
    }
  }
  return { ...actual, Room };
});

vi.mock('@livekit/components-react', async () => {
  const { livekitComponentsDouble } = await import('./testDoubles');
  return livekitComponentsDouble(h.liveKitRoomRenders, {
    useVoiceAssistant: () => ({ state: 'listening', agent: undefined, audioTrack: undefined, agentAttributes: {} }),
    useChat: () => ({ send: h.send, chatMessages: [], isSending: false }),
    useTranscriptions: () => h.transcriptions,
  });
});

const SESSION = { url: 'ws://127.0.0.1:7880', token: 'tok', room: 'sala', identity: 'usuario' };

const PERMISSION_DENIED_MESSAGE =
  'El navegador no permite usar el micrófono. Puede escribir sus preguntas abajo, o permitir el micrófono ' +
  'en la configuración del sitio y volver a empezar.';

function deferred<T>() {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

function sessionResponse(): Response {
  return new Response(JSON.stringify(SESSION), { status: 200, headers: { 'Content-Type': 'application/json' } });
}

function fakeTrack() {
  return { stop: vi.fn() } as unknown as LocalAudioTrack & { stop: ReturnType<typeof vi.fn> };
}

/** Let pending promise chains (and the state updates they cause) run. */
async function settle() {
  await act(async () => {
    for (let i = 0; i < 5; i++) await new Promise((r) => setTimeout(r, 0));
  });
}

let fetchMock: ReturnType<typeof vi.fn>;

/** The page's session requests (the page also asks /api/config for the site's mode once, on load). */
function sessionCalls() {
  return fetchMock.mock.calls.filter(([url]) => url === '/api/session');
}

beforeEach(() => {
  h.rooms.length = 0;
  h.liveKitRoomRenders.length = 0;
  h.send.mockClear();
  h.transcriptions = [];
  vi.mocked(acquireMicrophone).mockReset();
  vi.mocked(acquireMicrophone).mockImplementation(h.realAcquireMicrophone as typeof acquireMicrophone);
  fetchMock = vi.fn(async () => sessionResponse());
  vi.stubGlobal('fetch', fetchMock);
});

afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
});

describe('App: a microphone prompt answered after Stop', () => {
  it('releases the track and does not revive the session when Stop came while the room was up', async () => {
    const mic = deferred<MicrophoneResult>();
    vi.mocked(acquireMicrophone).mockReturnValue(mic.promise);
    render(<App />);

    fireEvent.click(screen.getByTestId('start-button'));
    await settle();
    expect(acquireMicrophone).toHaveBeenCalledTimes(1);
    expect(sessionCalls()).toHaveLength(1);
    expect(h.rooms).toHaveLength(1);
    expect(screen.getByTestId('livekit-room')).toBeTruthy();
    const room = h.rooms[0]!;

    fireEvent.click(screen.getByTestId('stop-button'));
    expect(room.disconnect).toHaveBeenCalled();
    expect(screen.getByTestId('start-button')).toBeTruthy();
    expect(screen.queryByTestId('livekit-room')).toBeNull();
    const rendersAtStop = h.liveKitRoomRenders.length;

    // The person now answers the browser's prompt with "allow".
    const track = fakeTrack();
    await act(async () => mic.resolve({ ok: true, track }));
    await settle();
    // Released at once, not left recording until the old room happens to report something.
    expect(track.stop).toHaveBeenCalledTimes(1);

    // Even if the (stopped) room later reports "connected", nothing is published.
    await act(async () => room.simulateConnected());
    await settle();

    expect(track.stop).toHaveBeenCalledTimes(1);
    expect(room.localParticipant.publishTrack).not.toHaveBeenCalled();
    expect(screen.getByTestId('start-button')).toBeTruthy();
    expect(screen.queryByTestId('stop-button')).toBeNull();
    expect(screen.queryByTestId('livekit-room')).toBeNull();
    expect(h.liveKitRoomRenders.length).toBe(rendersAtStop);
    expect(h.rooms).toHaveLength(1);
    expect(sessionCalls()).toHaveLength(1);
    expect(screen.queryByTestId('mic-error')).toBeNull();
  });

  it('releases the track and never connects when Stop (Cancelar) came before the token arrived', async () => {
    const mic = deferred<MicrophoneResult>();
    vi.mocked(acquireMicrophone).mockReturnValue(mic.promise);
    const token = deferred<Response>();
    fetchMock.mockImplementation(() => token.promise);
    render(<App />);

    fireEvent.click(screen.getByTestId('start-button'));
    await settle();
    expect(screen.getByTestId('stop-button').textContent).toBe('Cancelar');

    fireEvent.click(screen.getByTestId('stop-button'));
    expect(screen.getByTestId('start-button')).toBeTruthy();

    // The token service answers late, then the prompt is allowed: the session must stay ended.
    await act(async () => token.resolve(sessionResponse()));
    await settle();
    const track = fakeTrack();
    await act(async () => mic.resolve({ ok: true, track }));
    await settle();

    expect(track.stop).toHaveBeenCalledTimes(1);
    expect(h.rooms).toHaveLength(0);
    expect(h.liveKitRoomRenders).toHaveLength(0);
    expect(screen.getByTestId('start-button')).toBeTruthy();
    expect(screen.queryByTestId('stop-button')).toBeNull();
    expect(screen.queryByRole('alert')).toBeNull();
  });

  it('a track allowed before Stop but still waiting for the room is released, not published', async () => {
    const mic = deferred<MicrophoneResult>();
    vi.mocked(acquireMicrophone).mockReturnValue(mic.promise);
    render(<App />);

    fireEvent.click(screen.getByTestId('start-button'));
    await settle();
    const room = h.rooms[0]!;
    const track = fakeTrack();
    // Allowed while the room is still connecting: the track waits for "connected" before publishing.
    await act(async () => mic.resolve({ ok: true, track }));
    await settle();
    expect(track.stop).not.toHaveBeenCalled();

    fireEvent.click(screen.getByTestId('stop-button'));
    // The connection attempt that was already under way completes after Stop.
    await act(async () => room.simulateConnected());
    await settle();

    expect(room.localParticipant.publishTrack).not.toHaveBeenCalled();
    expect(track.stop).toHaveBeenCalled();
    expect(screen.getByTestId('start-button')).toBeTruthy();
    expect(screen.queryByTestId('livekit-room')).toBeNull();
    expect(screen.queryByTestId('mic-error')).toBeNull();
  });

  it('a refusal answered after Stop shows no microphone notice', async () => {
    const mic = deferred<MicrophoneResult>();
    vi.mocked(acquireMicrophone).mockReturnValue(mic.promise);
    render(<App />);

    fireEvent.click(screen.getByTestId('start-button'));
    await settle();
    fireEvent.click(screen.getByTestId('stop-button'));
    await act(async () => mic.resolve({ ok: false, message: PERMISSION_DENIED_MESSAGE }));
    await settle();

    expect(screen.queryByTestId('mic-error')).toBeNull();
    expect(screen.getByTestId('start-button')).toBeTruthy();
  });

  it('control: a prompt allowed while the session is live publishes the track and keeps it running', async () => {
    const mic = deferred<MicrophoneResult>();
    vi.mocked(acquireMicrophone).mockReturnValue(mic.promise);
    render(<App />);

    fireEvent.click(screen.getByTestId('start-button'));
    await settle();
    const room = h.rooms[0]!;
    const track = fakeTrack();
    await act(async () => mic.resolve({ ok: true, track }));
    await act(async () => room.simulateConnected());
    await settle();

    expect(room.localParticipant.publishTrack).toHaveBeenCalledWith(track);
    expect(track.stop).not.toHaveBeenCalled();
    expect(screen.getByTestId('stop-button').textContent).toBe('Detener');
  });
});

describe('App: microphone permission denied', () => {
  let getUserMedia: ReturnType<typeof vi.fn>;

  beforeEach(() => {
    // The real acquireMicrophone → livekit-client createLocalAudioTrack → getUserMedia, refused by the browser.
    getUserMedia = vi.fn(async () => {
      throw new DOMException('Permission denied', 'NotAllowedError');
    });
    vi.stubGlobal('navigator', Object.assign(Object.create(navigator), { mediaDevices: { getUserMedia } }));
  });

  it('shows the Spanish notice and typed questions still work once connected', async () => {
    render(<App />);

    fireEvent.click(screen.getByTestId('start-button'));
    await settle();

    expect(getUserMedia).toHaveBeenCalled();
    const notice = screen.getByTestId('mic-error');
    expect(notice.textContent).toBe(PERMISSION_DENIED_MESSAGE);
    expect(notice.getAttribute('role')).toBe('alert');
    // The session itself goes on: no session error, the room is up and not torn down.
    expect(screen.getByTestId('stop-button').textContent).toBe('Detener');
    const room = h.rooms[0]!;
    expect(room.disconnect).not.toHaveBeenCalled();

    // The room connects (LiveKitRoom reports it).
    const props = h.liveKitRoomRenders.at(-1)!;
    expect(props.connect).toBe(true);
    expect(props.serverUrl).toBe(SESSION.url);
    expect(props.token).toBe(SESSION.token);
    await act(async () => {
      room.simulateConnected();
      props.onConnected?.();
    });
    await settle();

    const input = screen.getByTestId('chat-input') as HTMLInputElement;
    expect(input.disabled).toBe(false);
    fireEvent.change(input, { target: { value: '¿Qué plazo tiene una apelación?' } });
    const sendButton = screen.getByTestId('chat-send') as HTMLButtonElement;
    expect(sendButton.disabled).toBe(false);
    fireEvent.click(sendButton);
    await settle();

    expect(h.send).toHaveBeenCalledWith('¿Qué plazo tiene una apelación?');
    expect(input.value).toBe('');
    // Still denied, still said, and nothing was published.
    expect(screen.getByTestId('mic-error').textContent).toBe(PERMISSION_DENIED_MESSAGE);
    expect(room.localParticipant.publishTrack).not.toHaveBeenCalled();
    expect(screen.getByTestId('stop-button')).toBeTruthy();
  });
});

describe('App: privacy notice', () => {
  it('says where audio and searches go before the microphone is requested', async () => {
    render(<App />);
    const notice = screen.getByTestId('privacy-notice');
    expect(notice.textContent).toContain('OpenAI');
    expect(notice.textContent).toContain('modo de ensayo');
    expect(notice.textContent).toContain('simulador local');
    expect(notice.textContent).toContain('servicio de búsqueda');
    expect(acquireMicrophone).not.toHaveBeenCalled();

    fireEvent.click(screen.getByTestId('start-button'));
    await settle();
    expect(acquireMicrophone).toHaveBeenCalledTimes(1);
    expect(screen.queryByTestId('privacy-notice')).toBeNull();
  });

  it('Stop forgets the resume token, so a reload starts a new conversation', async () => {
    window.sessionStorage.clear();
    fetchMock.mockImplementation(async () =>
      new Response(JSON.stringify({ ...SESSION, resume: 'r1' }), {
        status: 200,
        headers: { 'Content-Type': 'application/json' },
      }),
    );
    vi.mocked(acquireMicrophone).mockResolvedValue({ ok: false, message: 'x' });
    render(<App />);
    fireEvent.click(screen.getByTestId('start-button'));
    await settle();
    expect(window.sessionStorage.getItem('lexvoz.resume')).toBe('r1');
    fireEvent.click(screen.getByTestId('stop-button'));
    expect(window.sessionStorage.getItem('lexvoz.resume')).toBeNull();
  });
});

describe('App: the agent leaves while a search runs', () => {
  const agent = { identity: 'agente', kind: ParticipantKind.AGENT };

  /** A started session whose agent has announced a search that is still running; the fake room. */
  async function sessionWithRunningSearch(): Promise<FakeRoom> {
    vi.mocked(acquireMicrophone).mockResolvedValue({ ok: true, track: fakeTrack() });
    render(<App />);
    fireEvent.click(screen.getByTestId('start-button'));
    await settle();
    const room = h.rooms[0]!;
    await act(async () => room.simulateConnected());
    await settle();
    const started = { v: 1, type: 'started', call_id: 'c1', turn: 1, query: 'derecho a huelga' };
    const payload = new TextEncoder().encode(JSON.stringify(started));
    await act(async () => room.emit(RoomEvent.DataReceived, payload, agent, 0, 'lexvoz.research'));
    expect(screen.getByTestId('research-query').textContent).toBe('Investigando: derecho a huelga');
    return room;
  }

  it('shows the search as interrupted instead of running for good, and only for the agent leaving', async () => {
    const room = await sessionWithRunningSearch();
    const person = { identity: 'otra', kind: ParticipantKind.STANDARD };
    await act(async () => room.emit(RoomEvent.ParticipantDisconnected, person));
    expect(screen.queryByTestId('research-interrupted')).toBeNull();

    await act(async () => room.emit(RoomEvent.ParticipantDisconnected, agent));
    expect(screen.getByTestId('research-interrupted').textContent).toContain('el agente se desconectó');
  });

  it('shows a search running when the person stops as interrupted by the end of the session', async () => {
    await sessionWithRunningSearch();
    fireEvent.click(screen.getByTestId('stop-button'));
    expect(screen.getByTestId('research-interrupted').textContent).toContain('la sesión terminó');
    expect(screen.getByTestId('research-query').textContent).toBe('Búsqueda: derecho a huelga');
  });
});

describe('App: citation checks from the agent', () => {
  const agent = { identity: 'agente', kind: ParticipantKind.AGENT };
  const source = { title: 'Constitución', citation: 'Constitución Política, artículo 74', excerpt: 'Todos…' };
  const check = {
    v: 1,
    type: 'citation_checked',
    turn: 1,
    said: 'articulo 74 de la constitucion',
    article: '74',
    norm: 'constitucion',
    verified: true,
    source: source.citation,
    call_id: 'c1',
  };

  async function sessionWithAnswer(): Promise<FakeRoom> {
    h.transcriptions = [
      {
        text: 'El artículo 74 de la Constitución lo dice; el artículo 99 de la Constitución también.',
        participantInfo: { identity: 'agente' },
        streamInfo: { id: 'ans', timestamp: 2, attributes: { 'lk.transcription_final': 'false' } },
      },
    ];
    vi.mocked(acquireMicrophone).mockResolvedValue({ ok: true, track: fakeTrack() });
    render(<App />);
    fireEvent.click(screen.getByTestId('start-button'));
    await settle();
    const room = h.rooms[0]!;
    await act(async () => room.simulateConnected());
    await settle();
    const completed = { v: 1, type: 'completed', call_id: 'c1', turn: 1, tool_duration_ms: 5, sources: [source] };
    await act(async () => room.emit(RoomEvent.DataReceived, new TextEncoder().encode(JSON.stringify(completed)), agent, 0, 'lexvoz.research'));
    return room;
  }

  const send = (room: FakeRoom, message: object, from: object = agent) =>
    act(async () =>
      room.emit(RoomEvent.DataReceived, new TextEncoder().encode(JSON.stringify(message)), from, 0, 'lexvoz.research'),
    );

  it('links a verified citation from the transcript to its card, which says it was cited', async () => {
    const room = await sessionWithAnswer();
    await send(room, check);
    const card = screen.getByTestId('source-card');
    const link = screen.getByTestId('citation-link');
    expect(link.getAttribute('href')).toBe(`#${card.id}`);
    expect(link.textContent).toBe('artículo 74 de la Constitución (ver la fuente)');
    expect(card.classList.contains('is-cited-now')).toBe(true);
    expect(screen.getByTestId('source-cited').textContent).toBe('Citado en la respuesta');
  });

  it('marks an unverified citation in the transcript and says so in the research panel', async () => {
    const room = await sessionWithAnswer();
    const invented = { ...check, said: 'articulo 99 de la constitucion', article: '99', verified: false, source: null, call_id: null };
    await send(room, invented, { identity: 'otra', kind: ParticipantKind.STANDARD }); // only the agent's word counts
    expect(screen.queryByTestId('citation-unverified')).toBeNull();
    await send(room, invented);
    expect(screen.getByTestId('citation-unverified').textContent).toBe(
      '⚠ (artículo 99 de la Constitución: no verificado en las fuentes)',
    );
    expect(screen.getByTestId('citation-warning').textContent).toContain(
      'La respuesta citó un artículo que no estaba en las fuentes: artículo 99 de la Constitución.',
    );
    expect(screen.queryByTestId('source-cited')).toBeNull();
  });
});
