/**
 * The Lexvoz page: Start/Stop a voice session with the agent, see its state, the transcript, type a
 * question, and read the evidence it found.
 *
 * Each Start gets a brand-new Room and a generation number; anything that finishes late (the token
 * request, the microphone prompt) checks that its generation is still current before touching the room,
 * so Stop really ends the session.
 */
import {
  BarVisualizer,
  LiveKitRoom,
  RoomAudioRenderer,
  StartAudio,
  useChat,
  useConnectionState,
  useLocalParticipant,
  useTranscriptions,
  useVoiceAssistant,
  type AgentState,
} from '@livekit/components-react';
import {
  ConnectionState,
  Room,
  RoomEvent,
  type LocalAudioTrack,
  type RemoteParticipant,
  type TextStreamReader,
} from 'livekit-client';
import { useCallback, useEffect, useMemo, useReducer, useRef, useState, type FormEvent } from 'react';

import { useAgentRequest, type AgentWait } from './agentRequest';
import { AgentWaitNotice } from './AgentWaitNotice';
import { watchModelFailure, withModelLink } from './failures';
import { agentStateLabel, displayAgentState, END_REASON_ATTRIBUTE, endReasonMessage, MODE_ATTRIBUTE } from './labels';
import {
  initialResearchState,
  MAX_MESSAGE_CHARS,
  RESEARCH_TOPIC,
  researchReducer,
  type ResearchAction,
} from './research';
import { PrivacyNotice } from './PrivacyNotice';
import { ResearchPanel } from './ResearchPanel';
import {
  acquireMicrophone,
  forgetResume,
  requestSession,
  SessionRequestError,
  type MicrophoneResult,
} from './session';
import { buildTranscript, TRANSCRIPTION_FINAL_ATTRIBUTE, type RawLine, type TranscriptLine } from './transcript';

type Phase = 'idle' | 'starting' | 'active';

interface ActiveSession {
  generation: number;
  room: Room;
  url: string;
  token: string;
}

const MAX_CHAT_CHARS = 2_000;
const CONNECT_TIMEOUT_MS = 30_000;

/** Feed `lexvoz.research` packets and text streams into the reducer; returns the undo. */
function attachResearch(room: Room, dispatch: (action: ResearchAction) => void): () => void {
  const onData = (payload: Uint8Array, participant?: RemoteParticipant, _kind?: unknown, topic?: string) => {
    if (topic !== RESEARCH_TOPIC) return;
    dispatch({ type: 'received', sender: participant ? { kind: participant.kind } : undefined, payload });
  };
  room.on(RoomEvent.DataReceived, onData);
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
  const [research, dispatch] = useReducer(researchReducer, initialResearchState);
  const generation = useRef(0);
  // The generation whose room reached "connected": tells "the session ended" from "it never started".
  const connectedGeneration = useRef(0);
  // The same, as state, so the session view re-renders when its room connects ("conectando" until then).
  const [connectedSession, setConnectedSession] = useState(0);
  const detachResearch = useRef<(() => void) | null>(null);

  const endSession = useCallback((room: Room | undefined) => {
    generation.current += 1;
    detachResearch.current?.();
    detachResearch.current = null;
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

  const start = useCallback(async () => {
    const gen = ++generation.current;
    setPhase('starting');
    setError(null);
    setMicError(null);
    dispatch({ type: 'reset' });
    // Ask for the microphone right away (still inside the click), in parallel with the token request.
    const pendingMic = acquireMicrophone();
    let info;
    try {
      info = await requestSession();
    } catch (err) {
      void pendingMic.then((r) => r.ok && r.track.stop());
      if (generation.current === gen) {
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
    setSession({ generation: gen, room, url: info.url, token: info.token });
    setPhase('active');
    void publishMicrophone(room, gen, pendingMic);
  }, [publishMicrophone, endSession]);

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

  const onConnected = useCallback(() => {
    if (!session) return;
    connectedGeneration.current = session.generation;
    setConnectedSession(session.generation);
  }, [session]);

  const onDisconnected = useCallback(() => {
    if (session && generation.current === session.generation) {
      setError(
        connectedGeneration.current === session.generation
          ? 'La sesión terminó. Pulse «Empezar» para iniciar otra.'
          : 'No se pudo conectar con el servidor de voz. Compruebe que LiveKit está en marcha.',
      );
      forgetResume(); // the conversation is over: the next Start opens a new one
      endSession(session.room);
    }
  }, [endSession, session]);

  const onRoomError = useCallback(
    (err: Error) => {
      if (session && generation.current === session.generation) {
        console.warn('livekit error', err.message);
        setError('No se pudo conectar con el servidor de voz. Compruebe que LiveKit está en marcha.');
        endSession(session.room);
      }
    },
    [endSession, session],
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
      </div>

      {phase === 'idle' && <PrivacyNotice />}

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
            <SessionView connected={connectedSession === session.generation} token={session.token} />
          </LiveKitRoom>
        ) : (
          <div className="conversation">
            <Conversation
              state={phase === 'starting' ? 'connecting' : undefined}
              rehearsal={false}
              lines={[]}
              onSend={null}
              sending={false}
            />
          </div>
        )}
        <ResearchPanel state={research} />
      </main>
    </div>
  );
}

/**
 * Everything that needs the room context: agent state, audio, transcript and chat. `connected`: this
 * session's room has reached "connected" (LiveKitRoom's onConnected fired for it). `token`: the session's
 * join token, which also proves to the service that we are in the room when we ask it for an agent.
 */
function SessionView({ connected, token }: { connected: boolean; token: string }) {
  const { state: rawState, agent, audioTrack, agentAttributes } = useVoiceAssistant();
  const state = withModelLink(displayAgentState(rawState, connected), agentAttributes);
  // Kept once seen: the agent leaves the room right after saying goodbye, taking its attributes along.
  const [endReason, setEndReason] = useState<string | undefined>(undefined);
  const announcedEnd = agentAttributes?.[END_REASON_ATTRIBUTE];
  useEffect(() => {
    if (announcedEnd) setEndReason(announcedEnd);
  }, [announcedEnd]);
  // Not while reconnecting: the service could not see us in the room then, and would call the session invalid.
  const roomState = useConnectionState();
  const roomUp = connected && roomState === ConnectionState.Connected;
  const agentWait = useAgentRequest({
    token,
    connected: roomUp,
    agentPresent: agent !== undefined,
    ended: Boolean(endReason ?? announcedEnd),
  });
  const transcriptions = useTranscriptions();
  const { send, chatMessages, isSending } = useChat();
  const { localParticipant } = useLocalParticipant();
  const localIdentity = localParticipant.identity;

  const lines = useMemo<TranscriptLine[]>(() => {
    const spoken = transcriptions.map<RawLine>((t) => ({
      id: `t-${t.streamInfo.id}`,
      speaker: t.participantInfo.identity === localIdentity ? 'user' : 'agent',
      text: t.text,
      timestamp: t.streamInfo.timestamp,
      typed: false,
      finalAttribute: t.streamInfo.attributes?.[TRANSCRIPTION_FINAL_ATTRIBUTE],
    }));
    const typed = chatMessages.map<RawLine>((m) => ({
      id: `c-${m.id}`,
      speaker: m.from?.isLocal ? 'user' : 'agent',
      text: m.message,
      timestamp: m.timestamp,
      typed: true,
    }));
    // The agent's state is an input: its newest line stops being "in progress" when it stops speaking.
    return buildTranscript([...spoken, ...typed], rawState);
  }, [transcriptions, chatMessages, localIdentity, rawState]);

  const onSend = useCallback(
    async (text: string) => {
      await send(text);
    },
    [send],
  );

  return (
    <>
      <RoomAudioRenderer />
      <StartAudio label="Activar el audio del agente" className="btn btn-secondary start-audio" />
      <Conversation
        state={state}
        agentWait={agentWait}
        endNotice={endReasonMessage(endReason)}
        rehearsal={agentAttributes?.[MODE_ATTRIBUTE] === 'rehearsal'}
        lines={lines}
        onSend={onSend}
        sending={isSending}
        visualizer={<BarVisualizer state={state} track={audioTrack} barCount={7} className="visualizer" />}
      />
    </>
  );
}

interface ConversationProps {
  state: AgentState | undefined;
  /** Connected, but no agent has joined: what the person is told (the session stays usable). */
  agentWait?: AgentWait;
  /** The agent ended the conversation itself (e.g. its maximum length): why, in Spanish. */
  endNotice?: string | null;
  rehearsal: boolean;
  lines: TranscriptLine[];
  onSend: ((text: string) => Promise<void>) | null;
  sending: boolean;
  visualizer?: React.ReactNode;
}

/** The conversation column; rendered without a room too, so the layout does not jump on Start. */
function Conversation({
  state,
  agentWait = 'none',
  endNotice = null,
  rehearsal,
  lines,
  onSend,
  sending,
  visualizer,
}: ConversationProps) {
  const [draft, setDraft] = useState('');
  const [sendError, setSendError] = useState<string | null>(null);
  const transcriptRef = useRef<HTMLOListElement>(null);

  useEffect(() => {
    const el = transcriptRef.current;
    if (el) el.scrollTop = el.scrollHeight;
  }, [lines]);

  const submit = async (event: FormEvent) => {
    event.preventDefault();
    const text = draft.trim();
    if (!onSend || text.length === 0) return;
    setSendError(null);
    try {
      await onSend(text);
      setDraft('');
    } catch {
      setSendError('No se pudo enviar la pregunta. Inténtelo de nuevo.');
    }
  };

  return (
    <section className="panel conversation-panel" aria-labelledby="conversation-heading">
      {rehearsal && (
        <p className="rehearsal-banner" data-testid="rehearsal-banner" role="status">
          Modo de ensayo: respuestas de un simulador local, no de OpenAI
        </p>
      )}
      <div className="agent-status">
        <h2 id="conversation-heading">Conversación</h2>
        <p className={`agent-state agent-state-${state ?? 'inactive'}`} aria-live="polite">
          Agente: <span data-testid="agent-state">{agentStateLabel(state)}</span>
        </p>
      </div>
      {endNotice && (
        <p className="agent-ended" data-testid="agent-ended" role="status">
          {endNotice}
        </p>
      )}
      <AgentWaitNotice wait={agentWait} />
      <div className="visualizer-slot" aria-hidden="true">
        {visualizer}
      </div>
      <ol className="transcript" data-testid="transcript" ref={transcriptRef} role="log" aria-label="Transcripción">
        {lines.length === 0 && <li className="muted">La transcripción aparecerá aquí.</li>}
        {lines.map((line) => (
          <li key={line.id} className={`line line-${line.speaker}${line.final ? '' : ' line-interim'}`}>
            <span className="speaker">{line.speaker === 'user' ? 'Usted' : 'Lexvoz'}</span>
            {line.typed && <span className="typed-tag"> (escrito)</span>}
            <span className="line-text">{line.text}</span>
          </li>
        ))}
      </ol>
      <form className="chat-form" onSubmit={(e) => void submit(e)}>
        <label htmlFor="chat-input" className="visually-hidden">
          Escriba su pregunta
        </label>
        <input
          id="chat-input"
          data-testid="chat-input"
          type="text"
          autoComplete="off"
          maxLength={MAX_CHAT_CHARS}
          placeholder={onSend ? 'Escriba su pregunta…' : 'Pulse «Empezar» para conversar'}
          value={draft}
          onChange={(e) => setDraft(e.target.value)}
          disabled={!onSend}
        />
        <button
          type="submit"
          className="btn btn-primary"
          data-testid="chat-send"
          disabled={!onSend || sending || draft.trim().length === 0}
        >
          Enviar
        </button>
      </form>
      {sendError && (
        <p className="error" role="alert">
          {sendError}
        </p>
      )}
    </section>
  );
}
