/**
 * The part of the page that lives inside a LiveKit room: the agent's state and audio, the transcript, the
 * chat, and what the person is told while no agent has joined.
 */
import {
  BarVisualizer,
  RoomAudioRenderer,
  StartAudio,
  useChat,
  useConnectionState,
  useLocalParticipant,
  useRoomContext,
  useTranscriptions,
  useVoiceAssistant,
} from '@livekit/components-react';
import { ConnectionState, RoomEvent, type RemoteParticipant } from 'livekit-client';
import { useCallback, useEffect, useMemo, useRef, useState } from 'react';

import { useAgentRequest } from './agentRequest';
import { anchorTurn, placeCitations, type CitationView, type LineCitation } from './citations';
import { Conversation } from './Conversation';
import { withModelLink } from './failures';
import { HEARTBEAT_ATTRIBUTE, useAgentSilent } from './heartbeat';
import { agentMode, displayAgentState, END_REASON_ATTRIBUTE, endReasonMessage, MODE_ATTRIBUTE, type AgentMode } from './labels';
import { PAGE_TOPIC, usePageHello } from './pageHello';
import { parseSpeechMessage, SPEECH_TOPIC } from './speech';
import {
  buildTranscript,
  latestAgentLine,
  TRANSCRIPTION_FINAL_ATTRIBUTE,
  type RawLine,
  type TranscriptLine,
} from './transcript';

const NO_CITATIONS: readonly CitationView[] = [];

/** A transcript as shown: its lines, and the citation checks each line shows (by line id). */
export interface ShownTranscript {
  lines: readonly TranscriptLine[];
  citations: ReadonlyMap<string, readonly LineCitation[]>;
}

export const NO_TRANSCRIPT: ShownTranscript = { lines: [], citations: new Map() };

/**
 * What an earlier room of the same conversation showed, kept above the new room's lines after a rejoin: every
 * line is over (a line in progress when the connection went is as far as it will get), its marks as they were.
 */
export function frozenTranscript(shown: ShownTranscript): ShownTranscript {
  return { lines: shown.lines.map((line) => (line.final ? line : { ...line, final: true })), citations: shown.citations };
}

/**
 * Everything that needs the room context: agent state, audio, transcript and chat. `connected`: this
 * session's room has reached "connected" (LiveKitRoom's onConnected fired for it). `token`: the session's
 * join token, which also proves to the service that we are in the room when we ask it for an agent.
 * `onMode`: told the mode the agent announces (rehearsal or live), so the page can word its privacy notice.
 * `reducedMotion`: the person asked for less motion; the audio visualiser is left out.
 * `citations`: the worker's checks of the articles the agent named, with the cards verified ones link to; the
 * transcript marks them next to the words (citations.ts).
 * `onAgentLost`: the agent's sign of life stopped (its worker died) while LiveKit still lists it; the page
 * treats it as gone, as when an agent leaves the room (heartbeat.ts).
 * `earlier`: what the conversation's earlier rooms showed (after livekit-server shut down under it, App.tsx),
 * shown above this room's lines; `citations` then holds this room's checks only. `onShown`: told the whole
 * transcript as shown, each time it changes, so a rejoin can keep it.
 */
export function SessionView({
  connected,
  token,
  onMode,
  reducedMotion = false,
  newSources = 0,
  onShowNewSources,
  citations = NO_CITATIONS,
  onAgentLost,
  earlier = NO_TRANSCRIPT,
  onShown,
}: {
  connected: boolean;
  token: string;
  onMode?: (mode: AgentMode) => void;
  reducedMotion?: boolean;
  /** Sources that arrived while the research panel was out of sight, and how to bring it into view. */
  newSources?: number;
  onShowNewSources?: () => void;
  citations?: readonly CitationView[];
  onAgentLost?: () => void;
  earlier?: ShownTranscript;
  onShown?: (shown: ShownTranscript) => void;
}) {
  const { state: listedState, agent: listedAgent, audioTrack, agentAttributes } = useVoiceAssistant();
  // An agent whose sign of life stopped is shown and handled as one that left: no state of its own, no
  // agent present, so the page asks for another and names this one (heartbeat.ts).
  const silent = useAgentSilent(listedAgent?.identity, agentAttributes?.[HEARTBEAT_ATTRIBUTE]);
  const agent = silent ? undefined : listedAgent;
  const rawState = silent ? 'connecting' : listedState;
  useEffect(() => {
    if (silent) onAgentLost?.();
  }, [silent, onAgentLost]);
  const mode = agentMode(agentAttributes?.[MODE_ATTRIBUTE]);
  useEffect(() => {
    if (mode) onMode?.(mode);
  }, [mode, onMode]);
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
    agentIdentity: agent?.identity,
    ended: Boolean(endReason ?? announcedEnd),
  });
  const transcriptions = useTranscriptions();
  const { send, chatMessages, isSending } = useChat();
  const { localParticipant } = useLocalParticipant();
  const localIdentity = localParticipant.identity;

  // Agent lines the worker reported as cut off, by the person's voice or a typed question (see speech.ts).
  const [cut, setCut] = useState<ReadonlySet<string>>(() => new Set());
  const room = useRoomContext();

  // The attributes are read when this runs: livekit-client updates a stream's attributes in place when
  // its trailer (which carries the final "true") arrives, without a new render.
  const rawLines = useCallback((): RawLine[] => {
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
    return [...spoken, ...typed];
  }, [transcriptions, chatMessages, localIdentity]);

  // The agent's state is an input: its newest line stops being "in progress" when it stops speaking.
  const lines = useMemo<TranscriptLine[]>(() => buildTranscript(rawLines(), rawState, cut), [rawLines, rawState, cut]);

  // Each new agent is told whether one has already spoken to this person here, so it does not greet them again.
  const sendHello = useCallback(
    (payload: Uint8Array<ArrayBuffer>, identity: string) =>
      room.localParticipant.publishData(payload, { reliable: true, topic: PAGE_TOPIC, destinationIdentities: [identity] }),
    [room],
  );
  usePageHello({
    room: room.name,
    connected: roomUp,
    agentIdentity: agent?.identity,
    agentSpoke: lines.some((line) => line.speaker === 'agent'),
    send: sendHello,
  });

  // Read when a message arrives, so the handler below sees the lines of the latest render.
  const currentLines = useRef(rawLines);
  useEffect(() => {
    currentLines.current = rawLines;
  }, [rawLines]);
  useEffect(() => {
    const onData = (payload: Uint8Array, participant?: RemoteParticipant, _kind?: unknown, topic?: string) => {
      if (topic !== SPEECH_TOPIC) return;
      const message = parseSpeechMessage(participant ? { kind: participant.kind } : undefined, payload);
      if (message?.type !== 'interrupted') return;
      const id = latestAgentLine(currentLines.current());
      if (id) setCut((previous) => new Set(previous).add(id));
    };
    room.on(RoomEvent.DataReceived, onData);
    return () => {
      room.off(RoomEvent.DataReceived, onData);
    };
  }, [room]);

  // Each turn's citations are tied to the agent's lines on screen when its first check arrives (citations.ts).
  const [anchors, setAnchors] = useState<ReadonlyMap<number, number>>(() => new Map());
  useEffect(() => {
    const untied = citations.filter((c) => !anchors.has(c.turn));
    if (untied.length === 0) return;
    const next = new Map(anchors);
    const now = currentLines.current();
    for (const c of untied) if (!next.has(c.turn)) next.set(c.turn, anchorTurn(now, c.turn, next));
    setAnchors(next);
  }, [citations, anchors]);
  const placed = useMemo(() => placeCitations(lines, citations, anchors), [lines, citations, anchors]);
  const shown = useMemo<ShownTranscript>(
    () =>
      earlier.lines.length === 0
        ? { lines, citations: placed }
        : { lines: [...earlier.lines, ...lines], citations: new Map([...earlier.citations, ...placed]) },
    [earlier, lines, placed],
  );
  useEffect(() => {
    onShown?.(shown);
  }, [shown, onShown]);

  // Only sends: whether the question cut the agent off is the worker's to say (a `lexvoz.speech` message).
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
        rehearsal={mode === 'rehearsal'}
        lines={shown.lines}
        onSend={onSend}
        sending={isSending}
        newSources={newSources}
        onShowNewSources={onShowNewSources}
        citations={shown.citations}
        reducedMotion={reducedMotion}
        visualizer={
          reducedMotion ? undefined : (
            <BarVisualizer state={state} track={audioTrack} barCount={7} className="visualizer" />
          )
        }
      />
    </>
  );
}
