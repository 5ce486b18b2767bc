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
 *
 * An agent line is marked interrupted when the worker says its speech was cut off (a `lexvoz.speech`
 * `interrupted` message, see speech.ts): livekit-agents knows how much of each message was played, whether the
 * person spoke over it or typed a question. The page marks the newest spoken agent line when that message
 * arrives (`latestAgentLine`) and shows the mark once the line is final. It no longer guesses at send time
 * from what it shows: that guess missed lines cut by voice and could mark a line that had just finished.
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
  /** An agent line the worker reported as cut off (by voice or a typed question); only once final. */
  interrupted: boolean;
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
 * `cut`: ids of agent lines the worker reported as cut off (see `latestAgentLine`); such a line reads as
 * interrupted once it is final, never while it is still in progress.
 */
export function buildTranscript(
  lines: readonly RawLine[],
  agentState: AgentState | undefined,
  cut: ReadonlySet<string> = new Set(),
): TranscriptLine[] {
  const sorted = [...lines].sort((a, b) => a.timestamp - b.timestamp);
  const seenLater = new Set<Speaker>();
  const marked: TranscriptLine[] = new Array<TranscriptLine>(sorted.length);
  for (let i = sorted.length - 1; i >= 0; i -= 1) {
    const line = sorted[i]!;
    const final = isLineFinal(line, seenLater.has(line.speaker), agentState);
    marked[i] = { ...line, final, interrupted: final && line.speaker === 'agent' && !line.typed && cut.has(line.id) };
    seenLater.add(line.speaker);
  }
  return marked.filter((l) => l.text.trim().length > 0);
}

/**
 * The id of the newest spoken agent line, or null: the line a `lexvoz.speech` `interrupted` message is about
 * when it arrives (the worker sends it when that speech ends, before the agent's next line can begin).
 * Typed agent lines are not speech, so they never take the mark.
 */
export function latestAgentLine(lines: readonly RawLine[]): string | null {
  const agentLines = lines.filter((l) => l.speaker === 'agent' && !l.typed);
  const newest = agentLines.reduce<RawLine | null>((a, b) => (a === null || b.timestamp >= a.timestamp ? b : a), null);
  return newest === null ? null : newest.id;
}
