/**
 * The conversation column: agent state, notices, transcript and the chat box. Rendered without a room too,
 * so the layout does not jump on Start.
 */
import { type AgentState } from '@livekit/components-react';
import { useEffect, useRef, useState, type FormEvent } from 'react';

import { type AgentWait } from './agentRequest';
import { AgentWaitNotice } from './AgentWaitNotice';
import { linePieces, unverifiedMark, type LineCitation } from './citations';
import { agentStateLabel } from './labels';
import { NewSourcesNotice } from './ResearchPanel';
import { type TranscriptLine } from './transcript';

const MAX_CHAT_CHARS = 2_000;

export interface ConversationProps {
  state: AgentState | undefined;
  /** Connected, but no agent has joined: what the person is told (the session stays usable). */
  agentWait?: AgentWait;
  /** The agent ended the conversation itself (e.g. its maximum length): why, in Spanish. */
  endNotice?: string | null;
  rehearsal: boolean;
  lines: readonly TranscriptLine[];
  onSend: ((text: string) => Promise<void>) | null;
  sending: boolean;
  visualizer?: React.ReactNode;
  /** Sources that arrived out of sight (the panel is below, at phone width): "3 fuentes nuevas". */
  newSources?: number;
  /** Bring the newest search into view (the notice's button). */
  onShowNewSources?: () => void;
  /** The citation checks each line shows, by line id (citations.ts `placeCitations`). */
  citations?: ReadonlyMap<string, readonly LineCitation[]>;
  /** The person asked for less motion: a citation's link jumps to its card instead of scrolling there. */
  reducedMotion?: boolean;
}

/** Bring a cited source's card into view and move the focus there, so a keyboard lands on it too. */
function showCard(cardId: string, reducedMotion: boolean) {
  const card = document.getElementById(cardId);
  if (!card) return;
  card.scrollIntoView?.({ block: 'center', behavior: reducedMotion ? 'auto' : 'smooth' });
  card.focus({ preventScroll: true });
}

/**
 * A line's words with its citation checks. Everything here is React text: the words and the article come from
 * the worker and the model, so markup in them shows as characters. A verified citation's words link to its
 * card; an unverified one's are underlined and followed by a mark in words, which a screen reader reads with
 * them (and as their description), so neither depends on colour.
 */
function LineText({
  text,
  citations,
  reducedMotion,
}: {
  text: string;
  citations: readonly LineCitation[] | undefined;
  reducedMotion: boolean;
}) {
  if (!citations || citations.length === 0) return <span className="line-text">{text}</span>;
  return (
    <span className="line-text">
      {linePieces(text, citations).map((piece, i) => {
        const { citation } = piece;
        if (!citation) return <span key={i}>{piece.text}</span>;
        if (citation.verified && citation.cardId) {
          const cardId = citation.cardId;
          const onClick = (event: React.MouseEvent) => {
            event.preventDefault();
            showCard(cardId, reducedMotion);
          };
          return (
            <a key={citation.key} className="citation-link" data-testid="citation-link" href={`#${cardId}`} onClick={onClick}>
              {piece.text || `(${citation.label})`}
              <span className="visually-hidden"> (ver la fuente)</span>
            </a>
          );
        }
        const markId = `${citation.key}-mark`;
        return (
          <span key={citation.key}>
            {piece.text && (
              <span className="citation-unverified-words" aria-describedby={markId}>
                {piece.text}
              </span>
            )}{' '}
            <span id={markId} className="citation-unverified" data-testid="citation-unverified">
              <span aria-hidden="true">⚠ </span>({unverifiedMark(citation.label)})
            </span>
          </span>
        );
      })}
    </span>
  );
}

/** The conversation column; rendered without a room too, so the layout does not jump on Start. */
export function Conversation({
  state,
  agentWait = 'none',
  endNotice = null,
  rehearsal,
  lines,
  onSend,
  sending,
  visualizer,
  newSources = 0,
  onShowNewSources,
  citations,
  reducedMotion = false,
}: ConversationProps) {
  const [draft, setDraft] = useState('');
  const [sendError, setSendError] = useState<string | null>(null);
  const transcriptRef = useRef<HTMLDivElement>(null);

  const showNotice = newSources > 0 && onShowNewSources !== undefined;
  useEffect(() => {
    const el = transcriptRef.current;
    if (el) el.scrollTop = el.scrollHeight;
  }, [lines, showNotice, citations]);

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
      {/* Hidden altogether under prefers-reduced-motion (styles.css); SessionView then passes no visualiser. */}
      <div className="visualizer-slot" aria-hidden="true">
        {visualizer}
      </div>
      {/*
        The new-sources notice floats over the bottom of the transcript, right above the chat box: where the
        person is looking, without moving the box they type in, and never over it. The transcript makes room
        below its last line while the notice shows.
      */}
      <div className={`transcript-area${showNotice ? ' has-notice' : ''}`}>
        {/*
          The log is a wrapper, not the list itself: role="log" on the <ol> would hide that it is a list. It
          scrolls, so it takes keyboard focus (tabIndex 0) for a person without a mouse to scroll it.
        */}
        <div
          className="transcript"
          data-testid="transcript"
          ref={transcriptRef}
          role="log"
          aria-label="Transcripción"
          tabIndex={0}
        >
          <ol className="transcript-lines">
            {lines.length === 0 && <li className="muted">La transcripción aparecerá aquí.</li>}
            {lines.map((line) => (
              <li
                key={line.id}
                className={`line line-${line.speaker}${line.final ? '' : ' line-interim'}${line.interrupted ? ' line-interrupted' : ''}`}
              >
                <span className="speaker">{line.speaker === 'user' ? 'Usted' : 'Lexvoz'}</span>
                {line.typed && <span className="typed-tag"> (escrito)</span>}
                <LineText text={line.text} citations={citations?.get(line.id)} reducedMotion={reducedMotion} />
                {line.interrupted && (
                  <span className="interrupted-tag" data-testid="line-interrupted">
                    {' '}
                    … (interrumpido)
                  </span>
                )}
              </li>
            ))}
          </ol>
        </div>
        {showNotice && <NewSourcesNotice count={newSources} onShow={onShowNewSources} />}
      </div>
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
