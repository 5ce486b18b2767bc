/**
 * The evidence the agent found, one block per search. Everything here is rendered as React text:
 * excerpts come from legal documents and a search service we do not control, so markup in them must
 * show as characters, never run.
 *
 * A source card reads as a citation would: norm and article as the heading, the Título/Capítulo path
 * as a quiet line under it, date · Gaceta · official link, then the excerpt. With many norms in the
 * index, the norm's name appears once per card.
 */
import type { Ref } from 'react';

import { newSourcesLabel } from './newSources';
import type { ResearchEntry, ResearchSource, ResearchState } from './research';
import { failureText, formatDuration, interruptionText, researchAnnouncement } from './research';

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

function SourceCard({ source }: { source: ResearchSource }) {
  const path = pathLine(source.title, source.citation);
  const meta: string[] = [];
  if (source.date) meta.push(formatDate(source.date));
  if (source.gaceta) meta.push(`Gaceta Oficial ${source.gaceta}`);
  const linkText = source.officialSourceName ? `Fuente oficial: ${source.officialSourceName}` : 'Fuente oficial';
  return (
    <li className="source-card" data-testid="source-card">
      <h4 className="source-heading">{source.citation}</h4>
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

function EntryView({ entry }: { entry: ResearchEntry }) {
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
              {entry.sources.map((source, i) => (
                <SourceCard key={`${entry.callId}-${i}`} source={source} />
              ))}
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

/**
 * The panel. Screen readers hear one short line per search from the polite status region ("3 fuentes
 * encontradas"), not the excerpts: the entries themselves are not a live region. `listRef`: the entries'
 * container, which the page watches to tell whether new sources were seen.
 *
 * Cards of an ended conversation stay, marked as the previous conversation's, until the next Start clears
 * them: stopping the voice is often exactly when a person wants to read the articles and follow the official
 * links calmly, so Stop must not take the evidence away; but nothing may pass them off as the next
 * conversation's evidence, hence the notice and the set-apart style.
 */
export function ResearchPanel({ state, listRef }: { state: ResearchState; listRef?: Ref<HTMLDivElement> }) {
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
      <div className="research-entries" ref={listRef}>
        {state.entries.length === 0 ? (
          <p className="muted">Las fuentes que consulte el agente aparecerán aquí.</p>
        ) : (
          state.entries.map((entry) => <EntryView key={entry.callId} entry={entry} />)
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
