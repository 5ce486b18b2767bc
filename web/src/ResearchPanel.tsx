/**
 * The evidence the agent found, one block per search. Everything here is rendered as React text:
 * excerpts come from legal documents and a search service we do not control, so markup in them must
 * show as characters, never run.
 */
import type { ResearchEntry, ResearchSource, ResearchState } from './research';
import { failureText, formatDuration } from './research';

function SourceCard({ source }: { source: ResearchSource }) {
  const meta: string[] = [];
  if (source.date) meta.push(`Fecha: ${source.date}`);
  if (source.gaceta) meta.push(`Gaceta Oficial: ${source.gaceta}`);
  return (
    <li className="source-card" data-testid="source-card">
      <h4 className="source-title">{source.title}</h4>
      <p className="source-citation">{source.citation}</p>
      {source.excerpt && <blockquote className="source-excerpt">{source.excerpt}</blockquote>}
      {meta.length > 0 && <p className="source-meta">{meta.join(' · ')}</p>}
      {source.officialSourceUrl && (
        <p className="source-link">
          <a href={source.officialSourceUrl} target="_blank" rel="noopener noreferrer">
            {source.officialSourceName ? `Fuente oficial: ${source.officialSourceName}` : 'Fuente oficial'}
          </a>
        </p>
      )}
      {!source.officialSourceUrl && source.officialSourceName && (
        <p className="source-meta">Fuente oficial: {source.officialSourceName}</p>
      )}
    </li>
  );
}

function EntryView({ entry }: { entry: ResearchEntry }) {
  const label = entry.status === 'running' ? 'Investigando' : 'Búsqueda';
  return (
    <article className={`research-entry is-${entry.status}`} aria-busy={entry.status === 'running'}>
      <p className="research-query" data-testid="research-query">
        {entry.query ? `${label}: ${entry.query}` : `${label} (turno ${entry.turn})`}
      </p>
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
        <p className="research-failed" data-testid="research-failed" role="status">
          {failureText(entry.reason ?? '')}
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

export function ResearchPanel({ state }: { state: ResearchState }) {
  return (
    <section className="panel research-panel" data-testid="research-panel" aria-labelledby="research-heading">
      <h2 id="research-heading">Investigación</h2>
      <div aria-live="polite">
        {state.entries.length === 0 ? (
          <p className="muted">Las fuentes que consulte el agente aparecerán aquí.</p>
        ) : (
          state.entries.map((entry) => <EntryView key={entry.callId} entry={entry} />)
        )}
      </div>
    </section>
  );
}
