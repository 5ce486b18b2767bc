import { act, cleanup, fireEvent, render, screen, within } from '@testing-library/react';
import { ParticipantKind } from 'livekit-client';
import { afterEach, describe, expect, it, vi } from 'vitest';

import { initialResearchState, researchReducer, type ResearchState } from './research';
import { CITED_HIGHLIGHT_MS, formatDate, NewSourcesNotice, pathLine, ResearchPanel } from './ResearchPanel';

afterEach(cleanup);

const agent = { kind: ParticipantKind.AGENT };
const XSS = '<img src=x onerror=alert(1)>';

/** A `completed` message for call 'a' of turn 1 with these sources (the tool's duration is only asserted once). */
function completed(sources: unknown[], toolDurationMs = 1): Record<string, unknown> {
  return { v: 1, type: 'completed', call_id: 'a', turn: 1, tool_duration_ms: toolDurationMs, sources };
}

function stateFrom(...messages: unknown[]): ResearchState {
  return messages.reduce<ResearchState>(
    (s, m) => researchReducer(s, { type: 'received', sender: agent, payload: JSON.stringify(m) }),
    initialResearchState,
  );
}

describe('ResearchPanel', () => {
  it('shows the running query', () => {
    render(<ResearchPanel state={stateFrom({ v: 1, type: 'started', call_id: 'a', turn: 1, query: 'divorcio' })} />);
    expect(screen.getByTestId('research-query').textContent).toBe('Investigando: divorcio');
  });

  it('renders markup in evidence as text, never as elements', () => {
    const { container } = render(
      <ResearchPanel
        state={stateFrom(
          { v: 1, type: 'started', call_id: 'a', turn: 1, query: XSS },
          completed([{ title: XSS, citation: XSS, excerpt: XSS, gaceta: XSS, official_source_name: XSS }], 87.6),
        )}
      />,
    );
    expect(container.querySelector('img')).toBeNull();
    const card = screen.getByTestId('source-card');
    expect(card.querySelector('blockquote')?.textContent).toBe(XSS);
    expect(within(card).getByRole('heading').textContent).toBe(XSS);
    expect(screen.getByTestId('research-query').textContent).toBe(`Búsqueda: ${XSS}`);
    expect(screen.getByTestId('tool-duration').textContent).toBe('Tiempo de la herramienta: 88 ms');
  });

  it('links only to http(s) sources, in a new tab without referrer or opener', () => {
    render(
      <ResearchPanel
        state={stateFrom(
          completed([
            {
              title: 'Ley 1',
              citation: 'Art. 1',
              excerpt: 'x',
              date: '2020-01-02',
              gaceta: '28900',
              official_source_name: 'Gaceta Oficial',
              official_source_url: 'https://www.gacetaoficial.gob.pa/x',
            },
            { title: 'Ley 2', citation: 'Art. 2', excerpt: 'y', official_source_url: 'javascript:alert(1)' },
          ]),
        )}
      />,
    );
    const cards = screen.getAllByTestId('source-card');
    expect(cards).toHaveLength(2);
    const link = within(cards[0]!).getByRole('link');
    expect(link.getAttribute('href')).toBe('https://www.gacetaoficial.gob.pa/x');
    expect(link.getAttribute('target')).toBe('_blank');
    expect(link.getAttribute('rel')).toBe('noopener noreferrer');
    expect(within(cards[0]!).getByTestId('source-meta').textContent).toBe(
      '2 de enero de 2020 · Gaceta Oficial 28900 · Fuente oficial: Gaceta Oficial',
    );
    expect(within(cards[1]!).queryByRole('link')).toBeNull();
  });

  it('heads each card with norm and article, the Título/Capítulo path quietly below, the norm named once', () => {
    const ley = 'Ley de prueba 7 de 2099';
    render(
      <ResearchPanel
        state={stateFrom(
          completed([
            {
              title: 'Título IV. DEL PRÉSTAMO DE BICICLETAS PÚBLICAS · Capítulo II. Tarifas, daños y extravíos',
              citation: `${ley}, artículo 31`,
              excerpt: 'En caso de robo o extravío de la bicicleta…',
              date: '2099-11-30',
              gaceta: '99999-A',
              official_source_url: 'https://example.org/ley.pdf',
            },
            { title: 'Ley sin títulos', citation: 'Ley sin títulos, artículo 2', excerpt: 'Texto.' },
            {
              title: 'Constitución Política — TÍTULO III - DERECHOS',
              citation: 'Constitución Política, artículo 72',
              excerpt: 'Se protege la maternidad…',
            },
          ]),
        )}
      />,
    );
    const [first, bare, legacy] = screen.getAllByTestId('source-card');
    expect(within(first!).getByRole('heading').textContent).toBe(`${ley}, artículo 31`);
    expect(within(first!).getByTestId('source-path').textContent).toBe(
      'Título IV. DEL PRÉSTAMO DE BICICLETAS PÚBLICAS · Capítulo II. Tarifas, daños y extravíos',
    );
    expect(within(first!).getByTestId('source-meta').textContent).toBe(
      '30 de noviembre de 2099 · Gaceta Oficial 99999-A · Fuente oficial',
    );
    expect(first!.textContent!.split(ley)).toHaveLength(2);
    expect(within(bare!).queryByTestId('source-path')).toBeNull();
    expect(within(bare!).queryByTestId('source-meta')).toBeNull();
    expect(within(legacy!).getByTestId('source-path').textContent).toBe('TÍTULO III - DERECHOS');
    // order on the card: heading, path, meta, excerpt
    const order = Array.from(first!.children).map((el) => el.className);
    expect(order).toEqual(['source-heading', 'source-path', 'source-meta', 'source-excerpt']);
  });

  it('formats ISO dates in Spanish and leaves anything else as sent', () => {
    expect(formatDate('2002-01-22')).toBe('22 de enero de 2002');
    expect(formatDate('enero de 2002')).toBe('enero de 2002');
    expect(formatDate('2002-13-01')).toBe('2002-13-01');
    expect(pathLine('Ley 6 de 2002', 'Ley 6 de 2002, artículo 3')).toBeNull();
  });

  it('shows failures and discarded searches as such', () => {
    render(
      <ResearchPanel
        state={stateFrom(
          { v: 1, type: 'started', call_id: 'a', turn: 1, query: 'uno' },
          { v: 1, type: 'failed', call_id: 'a', turn: 1, reason: 'timeout' },
          { v: 1, type: 'started', call_id: 'b', turn: 2, query: 'dos' },
          { v: 1, type: 'discarded', call_id: 'b', turn: 2 },
        )}
      />,
    );
    expect(screen.getByTestId('research-failed').textContent).toBe('La búsqueda tardó demasiado y se canceló.');
    expect(screen.getByTestId('research-discarded').textContent).toBe('Descartada: la pregunta cambió');
  });

  it('says a search was interrupted when the agent left before it ended', () => {
    const running = stateFrom({ v: 1, type: 'started', call_id: 'a', turn: 1, query: 'uno' });
    render(<ResearchPanel state={researchReducer(running, { type: 'agentGone' })} />);
    expect(screen.getByTestId('research-interrupted').textContent).toBe(
      'Interrumpida: el agente se desconectó antes de terminar esta búsqueda.',
    );
    expect(screen.getByTestId('research-query').textContent).toBe('Búsqueda: uno');
  });
});

describe('ResearchPanel: what a screen reader hears and how it is organised', () => {
  const three = [1, 2, 3].map((i) => ({ title: `T${i}`, citation: `Constitución, artículo ${i}`, excerpt: 'x'.repeat(700) }));

  it('nests headings h2 panel, h3 search, h4 source, with no level skipped', () => {
    const { container } = render(
      <ResearchPanel state={stateFrom({ v: 1, type: 'started', call_id: 'a', turn: 1, query: 'idioma' }, completed(three))} />,
    );
    const levels = [...container.querySelectorAll('h1, h2, h3, h4, h5, h6')].map((el) => el.tagName);
    expect(levels).toEqual(['H2', 'H3', 'H4', 'H4', 'H4']);
  });

  it('announces one short line per search through its only live region, not the excerpts', () => {
    const { container } = render(<ResearchPanel state={stateFrom(completed(three))} />);
    const live = container.querySelectorAll('[aria-live], [role="status"], [role="alert"], [role="log"]');
    expect(live).toHaveLength(1);
    expect(live[0]!.getAttribute('role')).toBe('status');
    expect(live[0]!.textContent).toBe('3 fuentes encontradas');
    expect(container.textContent!.length).toBeGreaterThan(2000); // what it no longer reads out
  });

  it("keeps an ended conversation's cards under a notice, and announces nothing more", () => {
    const ended = researchReducer(stateFrom(completed(three)), { type: 'sessionEnded' });
    const { container } = render(<ResearchPanel state={ended} />);
    expect(screen.getAllByTestId('source-card')).toHaveLength(3);
    expect(screen.getByTestId('research-ended').textContent).toBe(
      'Fuentes de la conversación anterior. Se borrarán al pulsar «Empezar».',
    );
    expect(container.querySelector('.research-panel')?.classList.contains('is-ended')).toBe(true);
    expect(screen.getByTestId('research-announcement').textContent).toBe('');
  });

  it('shows no ended notice while the conversation goes on, or when nothing was found', () => {
    render(<ResearchPanel state={stateFrom(completed(three))} />);
    expect(screen.queryByTestId('research-ended')).toBeNull();
    cleanup();
    render(<ResearchPanel state={researchReducer(initialResearchState, { type: 'sessionEnded' })} />);
    expect(screen.queryByTestId('research-ended')).toBeNull();
  });
});

describe('NewSourcesNotice', () => {
  it('says how many sources are new, and shows them when pressed', () => {
    const onShow = vi.fn();
    render(<NewSourcesNotice count={3} onShow={onShow} />);
    const button = screen.getByRole('button');
    expect(button.textContent).toBe('3 fuentes nuevas ↓');
    fireEvent.click(button);
    expect(onShow).toHaveBeenCalledOnce();
  });

  it('is not there when nothing is new', () => {
    render(<NewSourcesNotice count={0} onShow={() => undefined} />);
    expect(screen.queryByTestId('new-sources')).toBeNull();
  });
});

describe('ResearchPanel: what the agent cited', () => {
  const cards = [
    { title: 'Constitución', citation: 'Constitución Política, artículo 74', excerpt: 'x' },
    { title: 'Constitución', citation: 'Constitución Política, artículo 75', excerpt: 'y' },
  ];
  const check = (over: Record<string, unknown>) => ({
    v: 1,
    type: 'citation_checked',
    turn: 1,
    said: 'articulo 74 de la constitucion',
    article: '74',
    norm: 'constitucion',
    verified: true,
    source: 'Constitución Política, artículo 74',
    call_id: 'a',
    ...over,
  });
  const invented = check({ said: 'articulo 99', article: '99', verified: false, source: null, call_id: null });

  afterEach(() => vi.useRealTimers());

  it('says when the answer cited an article that was not among the sources', () => {
    render(<ResearchPanel state={stateFrom(completed(cards), invented, { ...invented, said: 'el articulo 99' })} />);
    const warnings = screen.getAllByTestId('citation-warning');
    expect(warnings).toHaveLength(1); // the same article of the same turn, said twice, is named once
    expect(warnings[0]!.textContent).toBe(
      '⚠ La respuesta citó un artículo que no estaba en las fuentes: artículo 99 de la Constitución.',
    );
    expect(screen.queryByTestId('source-cited')).toBeNull();
  });

  it('shows a worker-sent citation norm as text, never as markup', () => {
    const { container } = render(<ResearchPanel state={stateFrom({ ...invented, norm: XSS })} />);
    expect(container.querySelector('img')).toBeNull();
    expect(screen.getByTestId('citation-warning').textContent).toContain(`artículo 99 de ${XSS}.`);
  });

  it('gives the cited card its link target and says in words that the answer cited it', () => {
    render(<ResearchPanel state={stateFrom(completed(cards), check({}))} />);
    const [cited, other] = screen.getAllByTestId('source-card');
    expect(cited!.id).toBe('fuente-a-0');
    expect(cited!.tabIndex).toBe(-1);
    expect(within(cited!).getByTestId('source-cited').textContent).toBe('Citado en la respuesta');
    expect(within(other!).queryByTestId('source-cited')).toBeNull();
    expect(screen.queryByTestId('citation-warnings')).toBeNull();
  });

  it('highlights the cited card when the citation arrives, for a short while', () => {
    vi.useFakeTimers();
    const before = stateFrom(completed(cards));
    const { rerender } = render(<ResearchPanel state={before} />);
    rerender(<ResearchPanel state={stateFrom(completed(cards), check({}))} />);
    const [cited, other] = screen.getAllByTestId('source-card');
    expect(cited!.classList.contains('is-cited-now')).toBe(true);
    expect(cited!.classList.contains('is-animated')).toBe(true);
    expect(other!.classList.contains('is-cited-now')).toBe(false);
    act(() => vi.advanceTimersByTime(CITED_HIGHLIGHT_MS - 1));
    expect(cited!.classList.contains('is-cited-now')).toBe(true);
    act(() => vi.advanceTimersByTime(1));
    expect(cited!.classList.contains('is-cited-now')).toBe(false);
    expect(within(cited!).getByTestId('source-cited')).toBeTruthy(); // the words stay
  });

  it('highlights a cited card without animation under reduced motion', () => {
    const { rerender } = render(<ResearchPanel state={stateFrom(completed(cards))} reducedMotion />);
    rerender(<ResearchPanel state={stateFrom(completed(cards), check({}))} reducedMotion />);
    const [cited] = screen.getAllByTestId('source-card');
    expect(cited!.classList.contains('is-cited-now')).toBe(true);
    expect(cited!.classList.contains('is-animated')).toBe(false);
  });

  it('does not highlight for citations already there, nor for a verified citation whose card is gone', () => {
    render(<ResearchPanel state={stateFrom(completed(cards), check({}))} />);
    expect(document.querySelector('.is-cited-now')).toBeNull();
    cleanup();
    const { rerender } = render(<ResearchPanel state={stateFrom(completed(cards))} />);
    rerender(<ResearchPanel state={stateFrom(completed(cards), check({ source: 'Ley 9 de 2001, artículo 1' }))} />);
    expect(document.querySelector('.is-cited-now')).toBeNull();
    expect(screen.queryByTestId('source-cited')).toBeNull();
  });
});
