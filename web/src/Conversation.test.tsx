import { cleanup, fireEvent, render, screen } from '@testing-library/react';
import { afterEach, describe, expect, it, vi } from 'vitest';

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
