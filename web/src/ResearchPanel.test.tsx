import { cleanup, render, screen, within } from '@testing-library/react';
import { ParticipantKind } from 'livekit-client';
import { afterEach, describe, expect, it } from 'vitest';

import { initialResearchState, researchReducer, type ResearchState } from './research';
import { ResearchPanel } from './ResearchPanel';

afterEach(cleanup);

const agent = { kind: ParticipantKind.AGENT };
const XSS = '<img src=x onerror=alert(1)>';

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
          {
            v: 1,
            type: 'completed',
            call_id: 'a',
            turn: 1,
            tool_duration_ms: 87.6,
            sources: [{ title: XSS, citation: XSS, excerpt: XSS, gaceta: XSS, official_source_name: XSS }],
          },
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
        state={stateFrom({
          v: 1,
          type: 'completed',
          call_id: 'a',
          turn: 1,
          tool_duration_ms: 1,
          sources: [
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
          ],
        })}
      />,
    );
    const cards = screen.getAllByTestId('source-card');
    expect(cards).toHaveLength(2);
    const link = within(cards[0]!).getByRole('link');
    expect(link.getAttribute('href')).toBe('https://www.gacetaoficial.gob.pa/x');
    expect(link.getAttribute('target')).toBe('_blank');
    expect(link.getAttribute('rel')).toBe('noopener noreferrer');
    expect(cards[0]!.textContent).toContain('Gaceta Oficial: 28900');
    expect(cards[0]!.textContent).toContain('Fecha: 2020-01-02');
    expect(within(cards[1]!).queryByRole('link')).toBeNull();
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
});
