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
  useTranscriptions,
  useVoiceAssistant,
} from '@livekit/components-react';
import { ConnectionState } from 'livekit-client';
import { useCallback, useEffect, useMemo, useState } from 'react';

import { useAgentRequest } from './agentRequest';
import { Conversation } from './Conversation';
import { withModelLink } from './failures';
import { displayAgentState, END_REASON_ATTRIBUTE, endReasonMessage, MODE_ATTRIBUTE } from './labels';
import { buildTranscript, TRANSCRIPTION_FINAL_ATTRIBUTE, type RawLine, type TranscriptLine } from './transcript';

/**
 * Everything that needs the room context: agent state, audio, transcript and chat. `connected`: this
 * session's room has reached "connected" (LiveKitRoom's onConnected fired for it). `token`: the session's
 * join token, which also proves to the service that we are in the room when we ask it for an agent.
 */
export function SessionView({ connected, token }: { connected: boolean; token: string }) {
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
    agentIdentity: agent?.identity,
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
