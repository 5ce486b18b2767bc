import { cleanup, fireEvent, render, screen } from '@testing-library/react';
import { afterEach, describe, expect, it, vi } from 'vitest';

import type { LineCitation } from './citations';
import { Conversation, type ConversationProps } from './Conversation';
import type { TranscriptLine } from './transcript';

afterEach(cleanup);

const line = (over: Partial<TranscriptLine>): TranscriptLine => ({
  id: 'x',
  speaker: 'agent',
  text: 'Modo',
  timestamp: 1,
  typed: false,
  final: true,
  interrupted: false,
  ...over,
});

const props = (over: Partial<ConversationProps> = {}): ConversationProps => ({
  state: 'listening',
  rehearsal: false,
  lines: [],
  onSend: async () => undefined,
  sending: false,
  ...over,
});

describe('Conversation', () => {
  it('keeps the transcript a list inside its log, so both roles reach assistive technology', () => {
    render(<Conversation {...props({ lines: [line({})] })} />);
    const log = screen.getByRole('log', { name: 'Transcripción' });
    expect(log.tagName).toBe('DIV');
    expect(log.querySelector(':scope > ol > li.line')).not.toBeNull();
    // It scrolls: a keyboard must be able to reach it to scroll it.
    expect(log.tabIndex).toBe(0);
  });

  it('ends an interrupted line with "… (interrumpido)" as text, after what was said', () => {
    render(<Conversation {...props({ lines: [line({ id: 'a', interrupted: true }), line({ id: 'b', text: 'Hola.' })] })} />);
    const marks = screen.getAllByTestId('line-interrupted');
    expect(marks).toHaveLength(1);
    expect(marks[0]!.closest('li')?.textContent).toBe('LexvozModo … (interrumpido)');
  });

  it('shows "N fuentes nuevas" between the transcript and the chat box, and shows them when pressed', () => {
    const onShow = vi.fn();
    render(<Conversation {...props({ newSources: 3, onShowNewSources: onShow })} />);
    const notice = screen.getByTestId('new-sources');
    expect(notice.textContent).toBe('3 fuentes nuevas ↓');
    const input = screen.getByTestId('chat-input');
    const transcript = screen.getByTestId('transcript');
    // In document order: after the transcript, before the chat box.
    expect(transcript.compareDocumentPosition(notice) & Node.DOCUMENT_POSITION_FOLLOWING).toBeTruthy();
    expect(notice.compareDocumentPosition(input) & Node.DOCUMENT_POSITION_FOLLOWING).toBeTruthy();
    fireEvent.click(notice);
    expect(onShow).toHaveBeenCalledOnce();
  });

  it('shows no notice when nothing is new', () => {
    render(<Conversation {...props({ newSources: 0, onShowNewSources: () => undefined })} />);
    expect(screen.queryByTestId('new-sources')).toBeNull();
  });
});

describe('Conversation: citation checks on the transcript', () => {
  const said = 'Según el artículo 75 de la Constitución, sí.';
  const unverified: LineCitation = { key: 'citation-1', start: 9, end: 39, verified: false, label: 'artículo 75 de la Constitución' };

  it('marks an unverified citation next to its words, in Spanish words, described to screen readers', () => {
    const citations = new Map([['a', [unverified]]]);
    render(<Conversation {...props({ lines: [line({ id: 'a', text: said })], citations })} />);
    const mark = screen.getByTestId('citation-unverified');
    expect(mark.textContent).toBe('⚠ (artículo 75 de la Constitución: no verificado en las fuentes)');
    const words = mark.parentElement!.querySelector('.citation-unverified-words')!;
    expect(words.textContent).toBe('artículo 75 de la Constitución');
    expect(words.getAttribute('aria-describedby')).toBe(mark.id);
    expect(mark.querySelector('[aria-hidden="true"]')?.textContent).toBe('⚠ ');
    // Next to the words: the mark comes right after them, and the line still reads whole.
    expect(mark.closest('li')?.textContent).toBe(
      'LexvozSegún el artículo 75 de la Constitución ⚠ (artículo 75 de la Constitución: no verificado en las fuentes), sí.',
    );
  });

  it('links a verified citation to its card, and the link brings the card into view and focus', () => {
    const card = document.createElement('div');
    card.id = 'fuente-c1-0';
    card.tabIndex = -1;
    const scrollIntoView = vi.fn();
    card.scrollIntoView = scrollIntoView;
    document.body.append(card);
    try {
      const verified: LineCitation = { ...unverified, verified: true, cardId: 'fuente-c1-0' };
      const { rerender } = render(
        <Conversation {...props({ lines: [line({ id: 'a', text: said })], citations: new Map([['a', [verified]]]) })} />,
      );
      const link = screen.getByTestId('citation-link');
      expect(link.getAttribute('href')).toBe('#fuente-c1-0');
      expect(link.textContent).toBe('artículo 75 de la Constitución (ver la fuente)');
      expect(screen.queryByTestId('citation-unverified')).toBeNull();
      fireEvent.click(link);
      expect(scrollIntoView).toHaveBeenLastCalledWith({ block: 'center', behavior: 'smooth' });
      expect(document.activeElement).toBe(card);

      // Under reduced motion the link jumps instead of scrolling smoothly.
      rerender(
        <Conversation
          {...props({ lines: [line({ id: 'a', text: said })], citations: new Map([['a', [verified]]]), reducedMotion: true })}
        />,
      );
      fireEvent.click(screen.getByTestId('citation-link'));
      expect(scrollIntoView).toHaveBeenLastCalledWith({ block: 'center', behavior: 'auto' });
    } finally {
      card.remove();
    }
  });

  it('shows a citation whose words were not found at the end of the line, and markup from the worker as text', () => {
    const xss = '<img src=x onerror=alert(1)>';
    const atEnd: LineCitation = { ...unverified, start: said.length, end: said.length, label: `artículo 1 de ${xss}` };
    const { container } = render(
      <Conversation {...props({ lines: [line({ id: 'a', text: said })], citations: new Map([['a', [atEnd]]]) })} />,
    );
    expect(container.querySelector('img')).toBeNull();
    expect(container.querySelector('.citation-unverified-words')).toBeNull();
    expect(screen.getByTestId('citation-unverified').closest('li')?.textContent).toBe(
      `Lexvoz${said} ⚠ (artículo 1 de ${xss}: no verificado en las fuentes)`,
    );
  });
});
