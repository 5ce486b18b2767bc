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
 * An agent line is marked interrupted when the person sent a typed question while the page showed that line
 * still being said (the newest agent line, the agent speaking, its final flag not yet "true"): the agents
 * framework answers typed input by cutting the current speech, so what the line shows is all that was said.
 * The page records that at the moment it sends (see `lineBeingSaid`) and shows the mark once the line is
 * final. A line cut by the person's voice is not marked: nothing the page receives tells it apart from a
 * line the agent finished just before the person spoke.
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
  /** An agent line the person cut off by sending a question while it was being said; only once final. */
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
 * `cut`: ids of agent lines the person talked over by typing (see `lineBeingSaid`); such a line reads as
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
 * The id of the agent line being said right now (the newest spoken agent line, not yet final), or null.
 * Read it just before the person's typed question goes out: that is the line the question cuts off.
 */
export function lineBeingSaid(lines: readonly RawLine[], agentState: AgentState | undefined): string | null {
  const agentLines = lines.filter((l) => l.speaker === 'agent' && !l.typed);
  const newest = agentLines.reduce<RawLine | null>((a, b) => (a === null || b.timestamp >= a.timestamp ? b : a), null);
  if (newest === null) return null;
  // A newer typed agent line would also make it final; isLineFinal's own rule for the newest one decides.
  const newerTyped = lines.some((l) => l.speaker === 'agent' && l.typed && l.timestamp > newest.timestamp);
  return isLineFinal(newest, newerTyped, agentState) ? null : newest.id;
}
