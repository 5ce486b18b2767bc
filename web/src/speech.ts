/**
 * `lexvoz.speech` messages: the agent says its speech was cut off, so the transcript can mark that line.
 *
 * The worker sends `{"v":1,"type":"interrupted"}` when livekit-agents reports an assistant message as only
 * partly played, whether the person spoke over it or typed a question (docs/protocol.md). The message
 * carries no text and no id: the page marks the newest spoken agent line it has when the message arrives
 * (`latestAgentLine` in transcript.ts), which is the cut one, since the agent's next line cannot start before
 * the worker has sent it. Like research messages, only the agent participant may send it: a person in the
 * room must not be able to mark the agent's lines.
 */
import { isAgentSender, parseJsonObject, type AgentSender } from './agentMessage';

export const SPEECH_TOPIC = 'lexvoz.speech';
export const SPEECH_PROTOCOL_VERSION = 1;
export const SPEECH_MESSAGE_TYPES = ['interrupted'] as const;
export type SpeechMessage = { type: (typeof SPEECH_MESSAGE_TYPES)[number] };

/** Far bigger than any honest message; anything larger is not parsed. */
const MAX_SPEECH_MESSAGE_CHARS = 1_024;

/** The message, if the agent participant sent a well-formed one of this protocol version; otherwise null. */
export function parseSpeechMessage(sender: AgentSender | undefined, payload: string | Uint8Array): SpeechMessage | null {
  if (!isAgentSender(sender)) return null;
  const data = parseJsonObject(payload, MAX_SPEECH_MESSAGE_CHARS);
  if (data === null || data.v !== SPEECH_PROTOCOL_VERSION) return null;
  const { type } = data;
  return (SPEECH_MESSAGE_TYPES as readonly unknown[]).includes(type) ? { type: type as SpeechMessage['type'] } : null;
}
