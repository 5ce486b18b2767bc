/**
 * The transcript as the person sees it: spoken and typed lines in time order, each marked final or still
 * in progress.
 *
 * Why not just read `lk.transcription_final`: useTranscriptions hands us the attributes a text stream was
 * *opened* with. The agent opens each spoken line with "false" and only says "true" when the stream
 * closes, and the hook neither re-renders nor exposes whether a stream is still open. So an agent line is
 * taken as final unless it is the newest agent line while the agent is still speaking. The user's speech
 * arrives as a new stream per STT update (same segment id), so their final "true" does reach us; a user
 * line is also final once a newer user line exists, so a lost final cannot leave one greyed out forever.
 */
import type { AgentState } from '@livekit/components-react';

/** The stream attribute the agents framework uses to say whether a transcription is final. */
export const TRANSCRIPTION_FINAL_ATTRIBUTE = 'lk.transcription_final';

export type Speaker = 'user' | 'agent';

export interface RawLine {
  id: string;
  speaker: Speaker;
  text: string;
  timestamp: number;
  typed: boolean;
  /** `lk.transcription_final` as the stream announced it, if it did (never set for typed lines). */
  finalAttribute?: string | undefined;
}

export interface TranscriptLine extends RawLine {
  final: boolean;
}

/**
 * Whether `line` is finished. `hasNewerFromSameSpeaker`: a later line (spoken or typed) by the same speaker
 * exists; `agentState`: the agent's current state.
 */
export function isLineFinal(
  line: Pick<RawLine, 'speaker' | 'typed' | 'finalAttribute'>,
  hasNewerFromSameSpeaker: boolean,
  agentState: AgentState | undefined,
): boolean {
  if (line.typed || hasNewerFromSameSpeaker) return true;
  if (line.speaker === 'agent') return line.finalAttribute === 'true' || agentState !== 'speaking';
  // A user line without the attribute (not from the agents' STT) has nothing more coming.
  return line.finalAttribute !== 'false';
}

/**
 * Sort the lines by time, mark each final or not, and drop blank ones. Finality is worked out before the
 * blank lines go, so the agent's just-opened (still empty) line already makes its previous one final.
 */
export function buildTranscript(lines: readonly RawLine[], agentState: AgentState | undefined): TranscriptLine[] {
  const sorted = [...lines].sort((a, b) => a.timestamp - b.timestamp);
  const seenLater = new Set<Speaker>();
  const marked: TranscriptLine[] = new Array<TranscriptLine>(sorted.length);
  for (let i = sorted.length - 1; i >= 0; i -= 1) {
    const line = sorted[i]!;
    marked[i] = { ...line, final: isLineFinal(line, seenLater.has(line.speaker), agentState) };
    seenLater.add(line.speaker);
  }
  return marked.filter((l) => l.text.trim().length > 0);
}
