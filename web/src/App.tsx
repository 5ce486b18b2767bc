/**
 * The Lexvoz page: Start/Stop a voice session with the agent, see its state, the transcript, type a
 * question, and read the evidence it found.
 *
 * Each Start gets a brand-new Room and a generation number; anything that finishes late (the token
 * request, the microphone prompt) checks that its generation is still current before touching the room,
 * so Stop really ends the session.
 *
 * When livekit-server shuts down under a conversation (an upgrade, a restart: livekit-client reports
 * SERVER_SHUTDOWN and does not reconnect by itself), the page joins the same room again on its own: it presents
 * its resume token for a new join token, as a reload does, and retries until livekit-server answers or
 * REJOIN_WITHIN_MS pass. The person reads that it is reconnecting instead of having to press Start, keeps the
 * research panel, and the new agent, told by the page's hello that it already spoke to them (pageHello.ts), says
 * one short line instead of the greeting. While in the room the page keeps that token fresh (resumeRenewal.ts), so
 * a conversation of any length comes back to its own room. The transcript so far stays on screen, above the new
 * room's lines.
 */
import { LiveKitRoom } from '@livekit/components-react';
import {
  ConnectionState,
  DisconnectReason,
  ParticipantKind,
  Room,
  RoomEvent,
  type LocalAudioTrack,
  type RemoteParticipant,
  type TextStreamReader,
} from 'livekit-client';
import { useCallback, useEffect, useMemo, useReducer, useRef, useState } from 'react';

import type { CitationView } from './citations';

import { Conversation } from './Conversation';
import { watchModelFailure } from './failures';
import type { AgentMode } from './labels';
import { usePrefersReducedMotion } from './motion';
import { useNewSources } from './newSources';
import {
  citedSource,
  initialResearchState,
  MAX_MESSAGE_CHARS,
  RESEARCH_TOPIC,
  researchReducer,
  sourceCardId,
  type ResearchAction,
} from './research';
import { PrivacyNotice } from './PrivacyNotice';
import { ResearchPanel } from './ResearchPanel';
import { useResumeRenewal } from './resumeRenewal';
import {
  acquireMicrophone,
  fetchSiteMode,
  forgetResume,
  requestSession,
  SessionRequestError,
  type MicrophoneResult,
} from './session';
import { frozenTranscript, NO_TRANSCRIPT, SessionView, type ShownTranscript } from './SessionView';

type Phase = 'idle' | 'starting' | 'active';

interface ActiveSession {
  generation: number;
  room: Room;
  url: string;
  token: string;
  /** How long the resume token that came with this session lives (renewed while connected: resumeRenewal.ts). */
  resumeTtlS?: number;
}

const CONNECT_TIMEOUT_MS = 30_000;
// How long the page keeps trying to join its room again after livekit-server shut down under it, and how long it
// waits between tries. A restart measured in the soak answered again within 3 s; an upgrade that pulls a new image
// may take tens of seconds. Past this, the person is told the session ended, as before.
export const REJOIN_WITHIN_MS = 60_000;
export const REJOIN_PAUSE_MS = 1_000;
export const REJOINING_MESSAGE = 'Se perdió la conexión con el servidor de voz. Reconectando…';
const ENDED_MESSAGE = 'La sesión terminó. Pulse «Empezar» para iniciar otra.';
const NO_SERVER_MESSAGE = 'No se pudo conectar con el servidor de voz. Compruebe que LiveKit está en marcha.';

/** Feed `lexvoz.research` packets and text streams into the reducer, and the agent's leaving; returns the undo. */
function attachResearch(room: Room, dispatch: (action: ResearchAction) => void): () => void {
  const onData = (payload: Uint8Array, participant?: RemoteParticipant, _kind?: unknown, topic?: string) => {
    if (topic !== RESEARCH_TOPIC) return;
    dispatch({ type: 'received', sender: participant ? { kind: participant.kind } : undefined, payload });
  };
  room.on(RoomEvent.DataReceived, onData);
  const onLeft = (participant: RemoteParticipant) => {
    if (participant.kind === ParticipantKind.AGENT) dispatch({ type: 'agentGone' });
  };
  room.on(RoomEvent.ParticipantDisconnected, onLeft);
  room.registerTextStreamHandler(RESEARCH_TOPIC, async (reader: TextStreamReader, info: { identity: string }) => {
    let text = '';
    for await (const chunk of reader) {
      text += chunk;
      if (text.length > MAX_MESSAGE_CHARS) return; // too big to be ours; drop it
    }
    const sender = room.remoteParticipants.get(info.identity);
    dispatch({ type: 'received', sender: sender ? { kind: sender.kind } : undefined, payload: text });
  });
  return () => {
    room.off(RoomEvent.DataReceived, onData);
    room.off(RoomEvent.ParticipantDisconnected, onLeft);
    room.unregisterTextStreamHandler(RESEARCH_TOPIC);
  };
}

/** Resolves once the room is connected; rejects if it disconnects or takes too long. */
function waitUntilConnected(room: Room): Promise<void> {
  if (room.state === ConnectionState.Connected) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const done = (ok: boolean) => {
      clearTimeout(timer);
      room.off(RoomEvent.Connected, onConnected);
      room.off(RoomEvent.Disconnected, onDisconnected);
      if (ok) resolve();
      else reject(new Error('room not connected'));
    };
    const onConnected = () => done(true);
    const onDisconnected = () => done(false);
    const timer = setTimeout(() => done(false), CONNECT_TIMEOUT_MS);
    room.on(RoomEvent.Connected, onConnected);
    room.on(RoomEvent.Disconnected, onDisconnected);
  });
}

export function App() {
  const [phase, setPhase] = useState<Phase>('idle');
  const [session, setSession] = useState<ActiveSession | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [micError, setMicError] = useState<string | null>(null);
  // Shown while the page joins its room again after livekit-server shut down (REJOINING_MESSAGE).
  const [notice, setNotice] = useState<string | null>(null);
  // Until when a failed connection is tried again rather than reported (null: not rejoining); kept past that
  // moment until the session ends, so the person is then told the session ended, not that no server answers.
  const rejoinUntil = useRef<number | null>(null);
  const [research, dispatch] = useReducer(researchReducer, initialResearchState);
  // The transcript as last shown, and, after livekit-server shut down under the conversation, what its earlier
  // rooms showed: kept above the new room's lines, so the person does not lose the conversation on screen.
  // `citationFloor`: the last citation check of those rooms (research.ts `seq`); the new room places only later
  // ones, as its agent counts its turns afresh.
  const shownTranscript = useRef<ShownTranscript>(NO_TRANSCRIPT);
  const [earlier, setEarlier] = useState<ShownTranscript>(NO_TRANSCRIPT);
  const [citationFloor, setCitationFloor] = useState(0);
  const latestCitation = useRef(0);
  useEffect(() => {
    latestCitation.current = research.citations?.at(-1)?.seq ?? 0;
  }, [research.citations]);
  const onShown = useCallback((shown: ShownTranscript) => {
    shownTranscript.current = shown;
  }, []);
  const generation = useRef(0);
  // The generation whose room reached "connected": tells "the session ended" from "it never started".
  const connectedGeneration = useRef(0);
  // The same, as state, so the session view re-renders when its room connects ("conectando" until then).
  const [connectedSession, setConnectedSession] = useState(0);
  const detachResearch = useRef<(() => void) | null>(null);
  // The mode the last agent announced (rehearsal or live): the privacy notice says where the voice goes.
  const [mode, setMode] = useState<AgentMode | undefined>(undefined);
  // The mode the page service says this site runs in, for the first screen, before any agent has said it.
  const [siteMode, setSiteMode] = useState<AgentMode | undefined>(undefined);
  useEffect(() => {
    const abort = new AbortController();
    void fetchSiteMode(abort.signal).then((m) => {
      if (!abort.signal.aborted) setSiteMode(m);
    });
    return () => abort.abort();
  }, []);
  const reducedMotion = usePrefersReducedMotion();
  // New sources the person has not seen, announced near the chat while the panel is out of view.
  const researchList = useRef<HTMLDivElement>(null);
  const newSources = useNewSources(research.entries, researchList);
  const showNewSources = useCallback(() => {
    const list = researchList.current;
    if (!list) return;
    list.scrollIntoView({ block: 'start', behavior: reducedMotion ? 'auto' : 'smooth' });
    list.querySelector<HTMLElement>('.research-query')?.focus({ preventScroll: true });
  }, [reducedMotion]);
  // An agent whose sign of life stopped is gone as far as its searches go: none can report its end any more.
  const agentLost = useCallback(() => dispatch({ type: 'agentGone' }), []);

  // The citation checks, each verified one with the card it links to from the transcript.
  const citations = useMemo<CitationView[]>(
    () =>
      (research.citations ?? [])
        .filter((c) => c.seq > citationFloor)
        .map((c) => {
          const card = citedSource(research.entries, c);
          return card ? { ...c, cardId: sourceCardId(card.callId, card.index) } : c;
        }),
    [research, citationFloor],
  );

  const endSession = useCallback((room: Room | undefined) => {
    generation.current += 1;
    rejoinUntil.current = null;
    setNotice(null);
    detachResearch.current?.();
    detachResearch.current = null;
    dispatch({ type: 'sessionEnded' }); // detached: a search still running can never report its end
    shownTranscript.current = NO_TRANSCRIPT;
    setEarlier(NO_TRANSCRIPT);
    setCitationFloor(0);
    if (room) {
      // Stop our own tracks first: disconnect() would too, but only for tracks already published.
      for (const pub of room.localParticipant.trackPublications.values()) pub.track?.stop();
      void room.disconnect(true);
    }
    setSession(null);
    setPhase('idle');
  }, []);

  const publishMicrophone = useCallback(
    async (room: Room, gen: number, pending: Promise<MicrophoneResult>) => {
      const result = await pending;
      const current = () => generation.current === gen;
      if (!result.ok) {
        if (current()) setMicError(result.message);
        return;
      }
      const track: LocalAudioTrack = result.track;
      if (!current()) {
        track.stop(); // the prompt was answered after Stop: release the device, do not revive anything
        return;
      }
      try {
        await waitUntilConnected(room);
        if (!current()) throw new Error('stopped');
        await room.localParticipant.publishTrack(track);
        if (!current()) track.stop();
      } catch {
        track.stop();
        if (current()) setMicError('No se pudo enviar el audio del micrófono. Puede escribir sus preguntas abajo.');
      }
    },
    [],
  );

  // Join a room: a new session's (Start), or this tab's room again (its resume token) after livekit-server
  // shut down. `retry` is what a failure does instead of being reported, while a rejoin may still try again.
  const join = useCallback(
    async (gen: number, retry: () => boolean) => {
      // Ask for the microphone right away (still inside the click), in parallel with the token request.
      const pendingMic = acquireMicrophone();
      let info;
      try {
        info = await requestSession();
      } catch (err) {
        void pendingMic.then((r) => r.ok && r.track.stop());
        if (generation.current === gen && !retry()) {
          setNotice(null);
          setError(err instanceof SessionRequestError ? err.message : 'No se pudo iniciar la sesión.');
          setPhase('idle');
        }
        return;
      }
      if (generation.current !== gen) {
        void pendingMic.then((r) => r.ok && r.track.stop());
        return;
      }
      const room = new Room({ adaptiveStream: true, dynacast: true });
      const detachResearchOnly = attachResearch(room, dispatch);
      // The agent lost its voice model: say why, and give the Start button back.
      const detachFailure = watchModelFailure(room, (message) => {
        if (generation.current !== gen) return;
        setError(message);
        endSession(room);
      });
      detachResearch.current = () => {
        detachResearchOnly();
        detachFailure();
      };
      setSession({ generation: gen, room, url: info.url, token: info.token, resumeTtlS: info.resume_ttl_s });
      setPhase('active');
      void publishMicrophone(room, gen, pendingMic);
    },
    [publishMicrophone, endSession],
  );

  const start = useCallback(async () => {
    const gen = ++generation.current;
    rejoinUntil.current = null;
    setNotice(null);
    setPhase('starting');
    setError(null);
    setMicError(null);
    dispatch({ type: 'reset' });
    shownTranscript.current = NO_TRANSCRIPT;
    setEarlier(NO_TRANSCRIPT);
    setCitationFloor(0);
    await join(gen, () => false);
  }, [join]);

  // One more try at joining this tab's room, after a pause, while the rejoin window lasts. False once it is over.
  const rejoin = useCallback(
    (previous: Room): boolean => {
      const until = rejoinUntil.current;
      if (until === null || Date.now() >= until) return false;
      const gen = ++generation.current;
      detachResearch.current?.();
      detachResearch.current = null;
      dispatch({ type: 'agentGone' }); // its agent is gone with the old connection: no search of it can end now
      setEarlier(frozenTranscript(shownTranscript.current));
      setCitationFloor(latestCitation.current);
      for (const pub of previous.localParticipant.trackPublications.values()) pub.track?.stop();
      void previous.disconnect(true);
      setSession(null);
      setPhase('starting');
      setNotice(REJOINING_MESSAGE);
      setTimeout(() => {
        if (generation.current !== gen) return; // stopped meanwhile
        void join(gen, () => rejoin(previous));
      }, REJOIN_PAUSE_MS);
      return true;
    },
    [join],
  );

  const stop = useCallback(() => {
    forgetResume(); // ended on purpose: a reload starts a new conversation
    endSession(session?.room);
  }, [endSession, session]);

  // Leaving the page ends the session cleanly.
  useEffect(() => {
    const onUnload = () => session?.room.disconnect();
    window.addEventListener('pagehide', onUnload);
    return () => window.removeEventListener('pagehide', onUnload);
  }, [session]);

  useResumeRenewal(session !== null && connectedSession === session.generation, session?.resumeTtlS);

  const onConnected = useCallback(() => {
    if (!session) return;
    connectedGeneration.current = session.generation;
    setConnectedSession(session.generation);
    rejoinUntil.current = null; // back in the room
    setNotice(null);
  }, [session]);

  const onDisconnected = useCallback(
    (reason?: DisconnectReason) => {
      if (!session || generation.current !== session.generation) return;
      const wasConnected = connectedGeneration.current === session.generation;
      if (wasConnected && reason === DisconnectReason.SERVER_SHUTDOWN) {
        rejoinUntil.current = Date.now() + REJOIN_WITHIN_MS;
        if (rejoin(session.room)) return;
      }
      if (!wasConnected && rejoin(session.room)) return; // livekit-server is not back yet
      setError(wasConnected || rejoinUntil.current !== null ? ENDED_MESSAGE : NO_SERVER_MESSAGE);
      forgetResume(); // the conversation is over: the next Start opens a new one
      endSession(session.room);
    },
    [endSession, rejoin, session],
  );

  const onRoomError = useCallback(
    (err: Error) => {
      if (session && generation.current === session.generation) {
        console.warn('livekit error', err.message);
        if (rejoin(session.room)) return; // livekit-server is not back yet
        setError(NO_SERVER_MESSAGE);
        endSession(session.room);
      }
    },
    [endSession, rejoin, session],
  );

  return (
    <div className="app">
      <header className="app-header">
        <h1>Lexvoz</h1>
        <p className="tagline">Investigación jurídica panameña por voz</p>
        <p className="disclaimer" role="note">
          Orientación, no asesoría legal.
        </p>
      </header>

      <div className="controls">
        {phase === 'idle' ? (
          <button type="button" className="btn btn-primary" data-testid="start-button" onClick={() => void start()}>
            Empezar
          </button>
        ) : (
          <button type="button" className="btn btn-stop" data-testid="stop-button" onClick={stop}>
            {phase === 'starting' ? 'Cancelar' : 'Detener'}
          </button>
        )}
        {error && (
          <p className="error" data-testid="session-error" role="alert">
            {error}
          </p>
        )}
        {notice && (
          <p className="notice" data-testid="session-notice" role="status">
            {notice}
          </p>
        )}
      </div>

      {phase === 'idle' && <PrivacyNotice mode={mode ?? siteMode} />}

      {micError && (
        <p className="mic-error" data-testid="mic-error" role="alert">
          {micError}
        </p>
      )}

      <main className="layout">
        {session ? (
          <LiveKitRoom
            key={session.generation}
            room={session.room}
            serverUrl={session.url}
            token={session.token}
            connect={true}
            audio={false}
            video={false}
            onConnected={onConnected}
            onDisconnected={onDisconnected}
            onError={onRoomError}
            className="conversation"
          >
            <SessionView
              connected={connectedSession === session.generation}
              token={session.token}
              onMode={setMode}
              reducedMotion={reducedMotion}
              newSources={newSources}
              onShowNewSources={showNewSources}
              citations={citations}
              onAgentLost={agentLost}
              earlier={earlier}
              onShown={onShown}
            />
          </LiveKitRoom>
        ) : (
          <div className="conversation">
            <Conversation
              state={phase === 'starting' ? 'connecting' : undefined}
              rehearsal={false}
              lines={earlier.lines}
              citations={earlier.citations}
              onSend={null}
              sending={false}
            />
          </div>
        )}
        <ResearchPanel state={research} listRef={researchList} reducedMotion={reducedMotion} />
      </main>
    </div>
  );
}
