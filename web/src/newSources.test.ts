import { describe, expect, it } from 'vitest';

import { newSourcesLabel, unseenSources } from './newSources';
import type { ResearchEntry } from './research';

const source = { title: 't', citation: 'c', excerpt: 'e' };
const entry = (callId: string, status: ResearchEntry['status'], n = 0): ResearchEntry => ({
  callId,
  turn: 1,
  status,
  sources: Array.from({ length: n }, () => source),
});

describe('unseenSources', () => {
  it('counts the sources of completed searches not seen yet', () => {
    const entries = [entry('b', 'completed', 2), entry('a', 'completed', 3)];
    expect(unseenSources(entries, new Set())).toBe(5);
    expect(unseenSources(entries, new Set(['a']))).toBe(2);
    expect(unseenSources(entries, new Set(['a', 'b']))).toBe(0);
  });

  it('leaves out searches that are running, failed, discarded or interrupted', () => {
    const entries = [entry('r', 'running'), entry('f', 'failed'), entry('d', 'discarded'), entry('i', 'interrupted')];
    expect(unseenSources(entries, new Set())).toBe(0);
  });
});

describe('newSourcesLabel', () => {
  it('agrees in number', () => {
    expect(newSourcesLabel(1)).toBe('1 fuente nueva');
    expect(newSourcesLabel(3)).toBe('3 fuentes nuevas');
  });
});
