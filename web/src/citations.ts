/**
 * Where the transcript shows the worker's citation checks (`citation_checked` on `lexvoz.research`).
 *
 * A check says which words the agent spoke (`said`, folded: lowercase, no accents) and in which turn, not which
 * transcript line holds them: the page's lines carry no turn. So when the first check of a turn arrives, the page
 * ties that turn to the agent's lines on screen then (`anchorTurn`), and looks for the words in those lines,
 * folded the same way (`placeCitations`). Words it cannot find (the model wrote "74" where the line reads
 * "setenta y cuatro") are marked at the end of the agent's latest line of that turn.
 *
 * Kept free of React so the rules are unit-tested on their own; Conversation.tsx renders what this places.
 */
import type { CitationCheck } from './research';
import type { RawLine, TranscriptLine } from './transcript';

/** The worker's key for the Constitution (agent/voice/citations.py `CONSTITUTION`). */
export const CONSTITUTION_NORM = 'constitucion';
/** The worker's key for a law: "ley 6 de 2002". */
export const LAW_NORM = /^ley (\d+) de (\d{4})$/;

/** "artículo 75 de la Constitución", "artículo 3 de la Ley 6 de 2002", "artículo 12": a check as the person reads it. */
export function citationLabel(article: string, norm: string | null): string {
  const cited = `artículo ${article}`;
  if (norm === null) return cited;
  if (norm === CONSTITUTION_NORM) return `${cited} de la Constitución`;
  const law = LAW_NORM.exec(norm);
  return law ? `${cited} de la Ley ${law[1]} de ${law[2]}` : `${cited} de ${norm}`;
}

/** The transcript's mark next to words whose citation no delivered source holds ("artículo 75 de la Constitución"). */
export function unverifiedMark(label: string): string {
  return `${label}: no verificado en las fuentes`;
}

/** What the research panel says of such a citation. */
export function unverifiedNotice(article: string, norm: string | null): string {
  return `La respuesta citó un artículo que no estaba en las fuentes: ${citationLabel(article, norm)}.`;
}

const COMBINING = /\p{Mn}/u;
const WORD = /[\p{L}\p{N}]/u;

/**
 * The text folded as the worker folds it (lowercase, accents off, runs of spaces as one, trimmed), with, for each
 * folded character, where it starts and ends in the original text: a match in the folded text is then marked on
 * the words as they were written.
 */
export function foldWithOffsets(text: string): { folded: string; starts: number[]; ends: number[] } {
  let folded = '';
  const starts: number[] = [];
  const ends: number[] = [];
  let space = -1; // where a run of spaces began, written only once a character follows it
  let index = 0;
  for (const ch of text) {
    const end = index + ch.length;
    if (/\s/u.test(ch)) {
      if (space < 0 && folded.length > 0) space = index;
    } else {
      if (space >= 0) {
        folded += ' ';
        starts.push(space);
        ends.push(index);
        space = -1;
      }
      for (const part of ch.toLowerCase().normalize('NFKD')) {
        if (COMBINING.test(part)) continue;
        folded += part;
        for (let k = 0; k < part.length; k += 1) {
          starts.push(index);
          ends.push(end);
        }
      }
    }
    index = end;
  }
  return { folded, starts, ends };
}

export function fold(text: string): string {
  return foldWithOffsets(text).folded;
}

/** Where the folded words `said` are in `text`, as whole words, in the original text's offsets; null if absent. */
export function findSaid(text: string, said: string): { start: number; end: number } | null {
  const needle = fold(said);
  if (needle.length === 0) return null;
  const { folded, starts, ends } = foldWithOffsets(text);
  for (let at = folded.indexOf(needle); at >= 0; at = folded.indexOf(needle, at + 1)) {
    const before = folded[at - 1];
    const after = folded[at + needle.length];
    // "artículo 7" is not in "artículo 74".
    if ((before === undefined || !WORD.test(before)) && (after === undefined || !WORD.test(after))) {
      return { start: starts[at]!, end: ends[at + needle.length - 1]! };
    }
  }
  return null;
}

function spokenAgentLine(line: Pick<RawLine, 'speaker' | 'typed'>): boolean {
  return line.speaker === 'agent' && !line.typed;
}

function userTimes(lines: readonly RawLine[]): number[] {
  return lines
    .filter((l) => l.speaker === 'user' && l.text.trim().length > 0)
    .map((l) => l.timestamp)
    .sort((a, b) => a - b);
}

/** The time of the person's last line before `time` (-Infinity when none): where that agent reply began. */
function replyStart(users: readonly number[], time: number): number {
  let start = Number.NEGATIVE_INFINITY;
  for (const t of users) if (t < time) start = t;
  return start;
}

/**
 * Which agent lines a turn's citations are in, as the time of the person's line that opened the reply (the reply:
 * the spoken agent lines after it, up to the person's next line). `anchors`: the turns already tied.
 *
 * A turn is tied when its first check arrives, to the reply of the agent's newest line: the words are being
 * spoken, or were just cut off (then the person's new line is already there, so "the reply after the person's
 * newest line" would be the wrong one). But if an earlier turn is already tied to that reply, this turn's words
 * are not on screen yet: it takes the reply after the person's newest line, which they will join.
 */
export function anchorTurn(lines: readonly RawLine[], turn: number, anchors: ReadonlyMap<number, number>): number {
  const known = anchors.get(turn);
  if (known !== undefined) return known;
  const users = userTimes(lines);
  const newestUser = users[users.length - 1] ?? Number.NEGATIVE_INFINITY;
  const agentTimes = lines.filter(spokenAgentLine).map((l) => l.timestamp);
  if (agentTimes.length === 0) return newestUser;
  const reply = replyStart(users, Math.max(...agentTimes));
  const taken = [...anchors].some(([t, start]) => t < turn && start === reply);
  return taken ? Math.max(reply, newestUser) : reply;
}

/** A check shown in a transcript line: on the words `start`..`end`, or at the line's end when they equal. */
export interface LineCitation {
  key: string;
  start: number;
  end: number;
  verified: boolean;
  /** "artículo 74 de la Constitución". */
  label: string;
  /** The DOM id of the card a verified citation links to. */
  cardId?: string;
}

/** A check with the card it links to, if any (research.ts `citedSource`, `sourceCardId`). */
export type CitationView = CitationCheck & { cardId?: string };

/**
 * The checks each transcript line shows, by line id. A verified citation is shown only when its card is on the
 * page (it links there); an unverified one always is. Checks whose turn is not tied yet wait for the next render.
 * `lines`: as `buildTranscript` gives them (in time order, no blank lines).
 */
export function placeCitations(
  lines: readonly TranscriptLine[],
  citations: readonly CitationView[],
  anchors: ReadonlyMap<number, number>,
): Map<string, LineCitation[]> {
  const placed = new Map<string, LineCitation[]>();
  const users = userTimes(lines);
  const agentLines = lines.filter(spokenAgentLine);
  for (const citation of citations) {
    if (citation.verified && citation.cardId === undefined) continue;
    const start = anchors.get(citation.turn);
    if (start === undefined) continue;
    const end = users.find((t) => t > start) ?? Number.POSITIVE_INFINITY;
    const reply = agentLines.filter((l) => l.timestamp > start && l.timestamp < end);
    let line: TranscriptLine | undefined;
    let span: { start: number; end: number } | null = null;
    for (const candidate of reply) {
      span = findSaid(candidate.text, citation.said);
      if (span) {
        line = candidate;
        break;
      }
    }
    if (!line) {
      line = reply[reply.length - 1] ?? agentLines[agentLines.length - 1];
      if (!line) continue;
      span = { start: line.text.length, end: line.text.length };
    }
    const shown: LineCitation = {
      key: `citation-${citation.seq}`,
      start: span!.start,
      end: span!.end,
      verified: citation.verified,
      label: citationLabel(citation.article, citation.norm),
    };
    if (citation.cardId !== undefined) shown.cardId = citation.cardId;
    placed.set(line.id, [...(placed.get(line.id) ?? []), shown]);
  }
  return placed;
}

/** A line's text cut around its citations: plain runs, and each citation with the words it covers (maybe none). */
export type LinePiece = { text: string; citation?: undefined } | { text: string; citation: LineCitation };

export function linePieces(text: string, citations: readonly LineCitation[]): LinePiece[] {
  const sorted = [...citations].sort((a, b) => a.start - b.start || a.end - b.end);
  const pieces: LinePiece[] = [];
  let cursor = 0;
  for (const citation of sorted) {
    if (citation.start >= cursor) {
      if (citation.start > cursor) pieces.push({ text: text.slice(cursor, citation.start) });
      pieces.push({ text: text.slice(citation.start, citation.end), citation });
      cursor = citation.end;
    } else {
      // Words already covered by another citation: its mark goes right after them, without words of its own.
      pieces.push({ text: '', citation });
    }
  }
  if (cursor < text.length) pieces.push({ text: text.slice(cursor) });
  return pieces;
}
