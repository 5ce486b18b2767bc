/**
 * The evidence the agent found, one block per search. Everything here is rendered as React text:
 * excerpts come from legal documents and a search service we do not control, so markup in them must
 * show as characters, never run.
 *
 * A source card reads as a citation would: norm and article as the heading, the Título/Capítulo path
 * as a quiet line under it, date · Gaceta · official link, then the excerpt. With many norms in the
 * index, the norm's name appears once per card.
 */
import { useEffect, useRef, useState, type Ref } from 'react';

import { unverifiedNotice } from './citations';
import { newSourcesLabel } from './newSources';
import type { CitationCheck, ResearchEntry, ResearchSource, ResearchState } from './research';
import {
  citedSource,
  failureText,
  formatDuration,
  interruptionText,
  researchAnnouncement,
  sourceCardId,
} from './research';

/** How long a card stays highlighted after the agent cites it. */
export const CITED_HIGHLIGHT_MS = 4_000;

const MONTHS = [
  'enero', 'febrero', 'marzo', 'abril', 'mayo', 'junio',
  'julio', 'agosto', 'septiembre', 'octubre', 'noviembre', 'diciembre',
];

/** "2002-01-22" → "22 de enero de 2002"; anything else is shown as the server sent it. */
export function formatDate(date: string): string {
  const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(date);
  const month = m ? MONTHS[Number(m[2]) - 1] : undefined;
  return m && month ? `${Number(m[3])} de ${month} de ${m[1]}` : date;
}

/**
 * The quiet line under the heading: the source's title (its Título/Capítulo path), without the norm's name
 * when the title repeats it (the heading already says it), and not at all when it says nothing more.
 */
export function pathLine(title: string, citation: string): string | null {
  const norm = citation.split(/,\s*art(?:í|i)culo\s/i)[0]?.trim() ?? '';
  let path = title.trim();
  if (norm && path.toLowerCase().startsWith(norm.toLowerCase())) {
    path = path.slice(norm.length).replace(/^[\s·—–:,-]+/, '');
  }
  if (!path || citation.toLowerCase().includes(path.toLowerCase())) return null;
  return path;
}

/** How a card shows that the answer cited it: for good (`cited`), and just now (`highlighted`). */
interface CardCitation {
  cited: boolean;
  highlighted: boolean;
  reducedMotion: boolean;
}

function SourceCard({ source, id, citation }: { source: ResearchSource; id: string; citation: CardCitation }) {
  const path = pathLine(source.title, source.citation);
  const meta: string[] = [];
  if (source.date) meta.push(formatDate(source.date));
  if (source.gaceta) meta.push(`Gaceta Oficial ${source.gaceta}`);
  const linkText = source.officialSourceName ? `Fuente oficial: ${source.officialSourceName}` : 'Fuente oficial';
  const classes = ['source-card'];
  if (citation.highlighted) classes.push('is-cited-now', ...(citation.reducedMotion ? [] : ['is-animated']));
  // A cited card is where the transcript's link lands: it takes the focus then (tabIndex -1), so it says in words
  // that the answer cited it, not by the highlight alone.
  return (
    <li
      className={classes.join(' ')}
      data-testid="source-card"
      id={id}
      tabIndex={citation.cited ? -1 : undefined}
    >
      <h4 className="source-heading">{source.citation}</h4>
      {citation.cited && (
        <p className="source-cited" data-testid="source-cited">
          Citado en la respuesta
        </p>
      )}
      {path && (
        <p className="source-path" data-testid="source-path">
          {path}
        </p>
      )}
      {(meta.length > 0 || source.officialSourceUrl || source.officialSourceName) && (
        <p className="source-meta" data-testid="source-meta">
          {meta.join(' · ')}
          {meta.length > 0 && (source.officialSourceUrl || source.officialSourceName) && ' · '}
          {source.officialSourceUrl ? (
            <a href={source.officialSourceUrl} target="_blank" rel="noopener noreferrer">
              {linkText}
            </a>
          ) : (
            source.officialSourceName && linkText
          )}
        </p>
      )}
      {source.excerpt && <blockquote className="source-excerpt">{source.excerpt}</blockquote>}
    </li>
  );
}

function EntryView({
  entry,
  cited,
  highlighted,
  reducedMotion,
}: {
  entry: ResearchEntry;
  cited: ReadonlySet<string>;
  highlighted: ReadonlySet<string>;
  reducedMotion: boolean;
}) {
  const label = entry.status === 'running' ? 'Investigando' : 'Búsqueda';
  // Headings nest as the page reads: h2 "Investigación", h3 per search, h4 per source. tabIndex -1: the
  // "fuentes nuevas" notice moves focus here after scrolling to it.
  return (
    <article className={`research-entry is-${entry.status}`} aria-busy={entry.status === 'running'}>
      <h3 className="research-query" data-testid="research-query" tabIndex={-1}>
        {entry.query ? `${label}: ${entry.query}` : `${label} (turno ${entry.turn})`}
      </h3>
      {entry.status === 'completed' && (
        <>
          {entry.toolDurationMs !== undefined && (
            <p className="tool-duration" data-testid="tool-duration">
              Tiempo de la herramienta: {formatDuration(entry.toolDurationMs)}
            </p>
          )}
          {entry.sources.length === 0 ? (
            <p className="research-empty">No se encontraron fuentes para esta búsqueda.</p>
          ) : (
            <ol className="source-list">
              {entry.sources.map((source, i) => {
                const id = sourceCardId(entry.callId, i);
                const citation = { cited: cited.has(id), highlighted: highlighted.has(id), reducedMotion };
                return <SourceCard key={`${entry.callId}-${i}`} source={source} id={id} citation={citation} />;
              })}
            </ol>
          )}
        </>
      )}
      {entry.status === 'failed' && (
        <p className="research-failed" data-testid="research-failed">
          {failureText(entry.reason ?? '')}
        </p>
      )}
      {entry.status === 'interrupted' && (
        <p className="research-failed" data-testid="research-interrupted">
          {interruptionText(entry.interruption)}
        </p>
      )}
      {entry.status === 'discarded' && (
        <p className="research-discarded" data-testid="research-discarded">
          Descartada: la pregunta cambió
        </p>
      )}
    </article>
  );
}

function citedCardId(state: ResearchState, citation: CitationCheck): string | null {
  const card = citedSource(state.entries, citation);
  return card ? sourceCardId(card.callId, card.index) : null;
}

/**
 * The cards cited just now: a verified citation that arrives highlights its card for `CITED_HIGHLIGHT_MS`. The
 * checks already there when the panel appears are not new, so they highlight nothing.
 */
function useCitedHighlight(state: ResearchState): ReadonlySet<string> {
  const seen = useRef<WeakSet<CitationCheck> | null>(null);
  if (seen.current === null) seen.current = new WeakSet(state.citations ?? []);
  const timers = useRef(new Map<string, ReturnType<typeof setTimeout>>());
  const [lit, setLit] = useState<ReadonlySet<string>>(() => new Set());
  useEffect(() => {
    const known = seen.current!;
    const ids: string[] = [];
    for (const citation of state.citations ?? []) {
      if (known.has(citation)) continue;
      known.add(citation);
      const id = citedCardId(state, citation);
      if (id) ids.push(id);
    }
    if (ids.length === 0) return;
    setLit((previous) => new Set([...previous, ...ids]));
    for (const id of ids) {
      clearTimeout(timers.current.get(id)); // cited again: the highlight starts over
      timers.current.set(
        id,
        setTimeout(() => {
          timers.current.delete(id);
          setLit((previous) => new Set([...previous].filter((x) => x !== id)));
        }, CITED_HIGHLIGHT_MS),
      );
    }
  }, [state]);
  useEffect(() => {
    const pending = timers.current;
    return () => pending.forEach((timer) => clearTimeout(timer));
  }, []);
  return lit;
}

/** The unverified citations, newest first, one line per article a turn cited (its words may be marked twice). */
function unverifiedCitations(state: ResearchState): CitationCheck[] {
  const seen = new Set<string>();
  const out: CitationCheck[] = [];
  for (const c of [...(state.citations ?? [])].reverse()) {
    const key = JSON.stringify([c.turn, c.article, c.norm]);
    if (c.verified || seen.has(key)) continue;
    seen.add(key);
    out.push(c);
  }
  return out;
}

/**
 * The panel. Screen readers hear one short line per search from the polite status region ("3 fuentes
 * encontradas"), not the excerpts: the entries themselves are not a live region. `listRef`: the entries'
 * container, which the page watches to tell whether new sources were seen.
 *
 * Cards of an ended conversation stay, marked as the previous conversation's, until the next Start clears
 * them: stopping the voice is often exactly when a person wants to read the articles and follow the official
 * links calmly, so Stop must not take the evidence away; but nothing may pass them off as the next
 * conversation's evidence, hence the notice and the set-apart style.
 *
 * What the agent cited: a card a verified citation came from says so and is highlighted when the citation
 * arrives (no animation under reduced motion); an article the answer cited that no source held is named at
 * the top of the panel. Screen readers hear that from the transcript's mark, not from here again.
 */
export function ResearchPanel({
  state,
  listRef,
  reducedMotion = false,
}: {
  state: ResearchState;
  listRef?: Ref<HTMLDivElement>;
  reducedMotion?: boolean;
}) {
  const highlighted = useCitedHighlight(state);
  const cited = new Set(
    (state.citations ?? []).map((c) => citedCardId(state, c)).filter((id): id is string => id !== null),
  );
  const unverified = unverifiedCitations(state);
  const ended = state.ended === true && state.entries.length > 0;
  const announced = state.lastOutcome ? state.entries.find((e) => e.callId === state.lastOutcome) : undefined;
  const announcement = researchAnnouncement(announced);
  return (
    <section
      className={`panel research-panel${ended ? ' is-ended' : ''}`}
      data-testid="research-panel"
      aria-labelledby="research-heading"
    >
      <h2 id="research-heading">Investigación</h2>
      <p className="visually-hidden" role="status" data-testid="research-announcement">
        {/* keyed by the call: a second "3 fuentes encontradas" is a new node, so it is announced again */}
        {announcement && !ended && <span key={announced?.callId}>{announcement}</span>}
      </p>
      {ended && (
        <p className="research-ended" data-testid="research-ended">
          Fuentes de la conversación anterior. Se borrarán al pulsar «Empezar».
        </p>
      )}
      {unverified.length > 0 && (
        <ul className="citation-warnings" data-testid="citation-warnings">
          {unverified.map((c) => (
            <li key={c.seq} className="citation-warning" data-testid="citation-warning">
              <span aria-hidden="true">⚠ </span>
              {unverifiedNotice(c.article, c.norm)}
            </li>
          ))}
        </ul>
      )}
      <div className="research-entries" ref={listRef}>
        {state.entries.length === 0 ? (
          <p className="muted">Las fuentes que consulte el agente aparecerán aquí.</p>
        ) : (
          state.entries.map((entry) => (
            <EntryView
              key={entry.callId}
              entry={entry}
              cited={cited}
              highlighted={highlighted}
              reducedMotion={reducedMotion}
            />
          ))
        )}
      </div>
    </section>
  );
}

/**
 * "3 fuentes nuevas", shown near the chat while sources arrived that the person has not seen (the panel is
 * out of view, below the conversation at phone width). Pressing it scrolls to the newest search and moves
 * the focus there, so keyboard and screen reader users land on it too.
 */
export function NewSourcesNotice({ count, onShow }: { count: number; onShow: () => void }) {
  if (count === 0) return null;
  return (
    <div className="new-sources">
      <button type="button" className="btn new-sources-button" data-testid="new-sources" onClick={onShow}>
        {newSourcesLabel(count)} <span aria-hidden="true">↓</span>
      </button>
    </div>
  );
}
