import { ParticipantKind } from 'livekit-client';
import { describe, expect, it } from 'vitest';

import {
  applyResearchMessage,
  citedSource,
  failureText,
  FAILURE_REASONS,
  FAILURE_TEXT,
  formatDuration,
  initialResearchState,
  interruptionText,
  isAgentSender,
  researchAnnouncement,
  type ResearchEntry,
  MAX_CITATIONS,
  MAX_ENTRIES,
  parseResearchMessage,
  researchReducer,
  safeHttpUrl,
  sourceCardId,
  type ResearchState,
} from './research';

const agent = { kind: ParticipantKind.AGENT };
const person = { kind: ParticipantKind.STANDARD };

const started = { v: 1, type: 'started', call_id: 'c1', turn: 3, query: 'plazo de prescripción laboral' };
const source = {
  title: 'Código de Trabajo',
  citation: 'Artículo 12',
  excerpt: 'El trabajador tiene derecho…',
  date: '1971-12-30',
  gaceta: '17040',
  official_source_name: 'Gaceta Oficial',
  official_source_url: 'https://www.gacetaoficial.gob.pa/pdfTemp/17040/x.pdf',
};
const completed = { v: 1, type: 'completed', call_id: 'c1', turn: 3, tool_duration_ms: 123.4, sources: [source] };

function feed(messages: unknown[], sender = agent, state: ResearchState = initialResearchState): ResearchState {
  return messages.reduce<ResearchState>(
    (s, m) => researchReducer(s, { type: 'received', sender, payload: JSON.stringify(m) }),
    state,
  );
}

describe('parseResearchMessage', () => {
  it('parses the four message types', () => {
    expect(parseResearchMessage(JSON.stringify(started))).toEqual({
      type: 'started',
      callId: 'c1',
      turn: 3,
      query: 'plazo de prescripción laboral',
    });
    const parsed = parseResearchMessage(JSON.stringify(completed));
    expect(parsed?.type).toBe('completed');
    if (parsed?.type === 'completed') {
      expect(parsed.toolDurationMs).toBe(123.4);
      expect(parsed.sources[0]).toEqual({
        title: 'Código de Trabajo',
        citation: 'Artículo 12',
        excerpt: 'El trabajador tiene derecho…',
        date: '1971-12-30',
        gaceta: '17040',
        officialSourceName: 'Gaceta Oficial',
        officialSourceUrl: 'https://www.gacetaoficial.gob.pa/pdfTemp/17040/x.pdf',
      });
    }
    expect(parseResearchMessage(JSON.stringify({ v: 1, type: 'failed', call_id: 'c1', turn: 3, reason: 'timeout' })))
      .toEqual({ type: 'failed', callId: 'c1', turn: 3, reason: 'timeout' });
    expect(parseResearchMessage(JSON.stringify({ v: 1, type: 'discarded', call_id: 'c1', turn: 3 }))).toEqual({
      type: 'discarded',
      callId: 'c1',
      turn: 3,
    });
  });

  it('reads UTF-8 bytes as sent in data packets', () => {
    const bytes = new TextEncoder().encode(JSON.stringify(started));
    expect(parseResearchMessage(bytes)?.type).toBe('started');
    expect(parseResearchMessage(new Uint8Array([0xff, 0xfe, 0x7b]))).toBeNull();
  });

  it.each([
    ['not json', '{oops'],
    ['array', '[]'],
    ['null', 'null'],
    ['string', '"started"'],
    ['unknown version', JSON.stringify({ ...started, v: 2 })],
    ['missing version', JSON.stringify({ ...started, v: undefined })],
    ['version as string', JSON.stringify({ ...started, v: '1' })],
    ['unknown type', JSON.stringify({ ...started, type: 'progress' })],
    ['missing call_id', JSON.stringify({ ...started, call_id: undefined })],
    ['empty call_id', JSON.stringify({ ...started, call_id: '  ' })],
    ['numeric call_id', JSON.stringify({ ...started, call_id: 7 })],
    ['fractional turn', JSON.stringify({ ...started, turn: 1.5 })],
    ['negative turn', JSON.stringify({ ...started, turn: -1 })],
    ['turn as string', JSON.stringify({ ...started, turn: '3' })],
    ['started without query', JSON.stringify({ ...started, query: undefined })],
    ['started with object query', JSON.stringify({ ...started, query: { q: 1 } })],
    ['completed without sources', JSON.stringify({ ...completed, sources: undefined })],
    ['completed with object sources', JSON.stringify({ ...completed, sources: {} })],
    ['completed without duration', JSON.stringify({ ...completed, tool_duration_ms: undefined })],
    ['completed negative duration', JSON.stringify({ ...completed, tool_duration_ms: -5 })],
    ['completed string duration', JSON.stringify({ ...completed, tool_duration_ms: '12' })],
    ['source without title', JSON.stringify({ ...completed, sources: [{ ...source, title: undefined }] })],
    ['source with numeric citation', JSON.stringify({ ...completed, sources: [{ ...source, citation: 5 }] })],
    ['source that is a string', JSON.stringify({ ...completed, sources: ['Código'] })],
    ['source with numeric date', JSON.stringify({ ...completed, sources: [{ ...source, date: 1971 }] })],
    ['failed without reason', JSON.stringify({ v: 1, type: 'failed', call_id: 'c1', turn: 3 })],
  ])('rejects %s', (_name, payload) => {
    expect(parseResearchMessage(payload)).toBeNull();
  });

  it('rejects oversized messages without parsing them', () => {
    const huge = JSON.stringify({ ...started, query: 'x'.repeat(200_000) });
    expect(parseResearchMessage(huge)).toBeNull();
  });

  it('drops unsafe links but keeps the source', () => {
    for (const url of ['javascript:alert(1)', 'data:text/html,<b>x</b>', 'ftp://example.org/x', 'no es una url', '//x']) {
      const msg = parseResearchMessage(
        JSON.stringify({ ...completed, sources: [{ ...source, official_source_url: url }] }),
      );
      expect(msg?.type).toBe('completed');
      if (msg?.type === 'completed') {
        expect(msg.sources).toHaveLength(1);
        expect(msg.sources[0]?.officialSourceUrl).toBeUndefined();
      }
    }
  });
});

describe('safeHttpUrl', () => {
  it('accepts only http and https', () => {
    expect(safeHttpUrl('https://example.org/a?b=1')).toBe('https://example.org/a?b=1');
    expect(safeHttpUrl('http://example.org')).toBe('http://example.org/');
    expect(safeHttpUrl('HTTPS://EXAMPLE.org/x')).toBe('https://example.org/x');
    expect(safeHttpUrl('javascript:alert(1)')).toBeUndefined();
    expect(safeHttpUrl(' javascript:alert(1)')).toBeUndefined();
    expect(safeHttpUrl('JaVaScRiPt:alert(1)')).toBeUndefined();
    expect(safeHttpUrl('data:text/html,x')).toBeUndefined();
    expect(safeHttpUrl('vbscript:x')).toBeUndefined();
    expect(safeHttpUrl('https://user:pw@example.org/')).toBeUndefined();
    expect(safeHttpUrl('/relative/path')).toBeUndefined();
    expect(safeHttpUrl(42)).toBeUndefined();
    expect(safeHttpUrl('')).toBeUndefined();
  });
});

describe('researchReducer', () => {
  it('ignores the research topic from anyone but the agent', () => {
    expect(isAgentSender(agent)).toBe(true);
    expect(isAgentSender(person)).toBe(false);
    expect(isAgentSender(undefined)).toBe(false);
    expect(isAgentSender({})).toBe(false);
    expect(feed([started, completed], person)).toBe(initialResearchState);
    expect(
      researchReducer(initialResearchState, { type: 'received', sender: undefined, payload: JSON.stringify(started) }),
    ).toBe(initialResearchState);
    for (const kind of [ParticipantKind.INGRESS, ParticipantKind.EGRESS, ParticipantKind.SIP]) {
      expect(feed([started], { kind })).toBe(initialResearchState);
    }
  });

  it('goes from running to completed with sources and the tool time', () => {
    const running = feed([started]);
    expect(running.entries).toHaveLength(1);
    expect(running.entries[0]).toMatchObject({ callId: 'c1', status: 'running', query: started.query });
    const done = feed([completed], agent, running);
    expect(done.entries[0]).toMatchObject({ status: 'completed', toolDurationMs: 123.4, query: started.query });
    expect(done.entries[0]?.sources).toHaveLength(1);
  });

  it('records failures and discarded searches, and never goes back to running', () => {
    const failed = feed([started, { v: 1, type: 'failed', call_id: 'c1', turn: 3, reason: 'circuit_open' }]);
    expect(failed.entries[0]).toMatchObject({ status: 'failed', reason: 'circuit_open' });
    expect(feed([started], agent, failed).entries[0]?.status).toBe('failed');

    const discarded = feed([started, { v: 1, type: 'discarded', call_id: 'c1', turn: 3 }]);
    expect(discarded.entries[0]?.status).toBe('discarded');
  });

  it('keeps bad messages out and state unchanged', () => {
    const running = feed([started]);
    const after = researchReducer(running, { type: 'received', sender: agent, payload: '{"v":1,"type":"completed"}' });
    expect(after).toBe(running);
  });

  it('puts the newest search first and bounds the list', () => {
    const many = Array.from({ length: MAX_ENTRIES + 5 }, (_, i) => ({ ...started, call_id: `c${i}`, turn: i }));
    const state = feed(many);
    expect(state.entries).toHaveLength(MAX_ENTRIES);
    expect(state.entries[0]?.callId).toBe(`c${MAX_ENTRIES + 4}`);
  });

  it('accepts a completion whose start it never saw', () => {
    const state = applyResearchMessage(initialResearchState, {
      type: 'completed',
      callId: 'late',
      turn: 1,
      toolDurationMs: 5,
      sources: [],
    });
    expect(state.entries[0]).toMatchObject({ callId: 'late', status: 'completed' });
  });

  it('marks searches still running as interrupted when the agent leaves, and only those', () => {
    const failed = { v: 1, type: 'failed', call_id: 'c0', turn: 2, reason: 'timeout' };
    const state = feed([{ ...started, call_id: 'c0', turn: 2 }, failed, started]);
    const gone = researchReducer(state, { type: 'agentGone' });
    expect(gone.entries.map((e) => [e.callId, e.status])).toEqual([
      ['c1', 'interrupted'],
      ['c0', 'failed'],
    ]);
    expect(researchReducer(gone, { type: 'agentGone' })).toBe(gone);
    // An outcome that still arrives (the same agent back after a network blip) is the better information.
    expect(feed([completed], agent, gone).entries[0]).toMatchObject({ callId: 'c1', status: 'completed' });
    expect(gone.entries[0]?.interruption).toBe('agent_left');
    // A failure keeps its code and gets no cause of interruption; an interruption sets no failure code.
    expect(gone.entries[1]).toMatchObject({ status: 'failed', reason: 'timeout' });
    expect(gone.entries[1]?.interruption).toBeUndefined();
    expect(gone.entries[0]?.reason).toBeUndefined();
    const ended = researchReducer(feed([started]), { type: 'sessionEnded' });
    expect(ended.entries[0]).toMatchObject({ status: 'interrupted', interruption: 'session_ended' });
    expect(interruptionText('session_ended')).toContain('la sesión terminó');
    expect(interruptionText('agent_left')).toContain('el agente se desconectó');
  });

  it('resets', () => {
    expect(researchReducer(feed([started]), { type: 'reset' })).toEqual(initialResearchState);
    const ended = researchReducer(feed([started, completed]), { type: 'sessionEnded' });
    expect(researchReducer(ended, { type: 'reset' })).toEqual(initialResearchState);
  });

  it('keeps the cards of an ended conversation, marked as ended, until the next reset', () => {
    const done = feed([started, completed]);
    expect(done.ended).toBeFalsy();
    const ended = researchReducer(done, { type: 'sessionEnded' });
    expect(ended.ended).toBe(true);
    expect(ended.entries).toEqual(done.entries);
    expect(researchReducer(ended, { type: 'sessionEnded' })).toBe(ended);
    // The agent leaving mid-session does not end the conversation the page is in.
    expect(researchReducer(done, { type: 'agentGone' }).ended).toBeFalsy();
  });

  it('remembers whose outcome came last, to announce that search', () => {
    expect(feed([started]).lastOutcome).toBeUndefined();
    expect(feed([started, completed]).lastOutcome).toBe('c1');
    const second = { ...started, call_id: 'c2', turn: 4 };
    const failed = { v: 1, type: 'failed', call_id: 'c2', turn: 4, reason: 'timeout' };
    expect(feed([started, second, failed, completed]).lastOutcome).toBe('c1');
    expect(feed([started, completed, second, failed]).lastOutcome).toBe('c2');
    expect(researchReducer(feed([started]), { type: 'sessionEnded' }).lastOutcome).toBe('c1');
  });
});

describe('researchAnnouncement', () => {
  const entry = (over: Partial<ResearchEntry>): ResearchEntry => ({
    callId: 'c',
    turn: 1,
    status: 'completed',
    sources: [],
    ...over,
  });
  const src = { title: 't', citation: 'c', excerpt: 'un extracto largo' };

  it('is one short line with the count, never the excerpts', () => {
    expect(researchAnnouncement(entry({ sources: [src, src, src] }))).toBe('3 fuentes encontradas');
    expect(researchAnnouncement(entry({ sources: [src] }))).toBe('1 fuente encontrada');
    expect(researchAnnouncement(entry({ sources: [] }))).toBe('No se encontraron fuentes');
  });

  it('says why a search gave nothing, and nothing while it runs or once discarded', () => {
    expect(researchAnnouncement(entry({ status: 'failed', reason: 'timeout' }))).toBe(FAILURE_TEXT.timeout);
    expect(researchAnnouncement(entry({ status: 'interrupted', interruption: 'session_ended' }))).toBe(
      interruptionText('session_ended'),
    );
    expect(researchAnnouncement(entry({ status: 'running' }))).toBeNull();
    expect(researchAnnouncement(entry({ status: 'discarded' }))).toBeNull();
    expect(researchAnnouncement(undefined)).toBeNull();
  });
});

describe('texts', () => {
  it('has Spanish text for every failure code and a fallback', () => {
    for (const reason of FAILURE_REASONS) expect(failureText(reason)).toBe(FAILURE_TEXT[reason]);
    expect(failureText('something_new')).toBe('La búsqueda falló.');
  });

  it('formats the tool time', () => {
    expect(formatDuration(123.4)).toBe('123 ms');
    expect(formatDuration(12_345)).toBe('12,3 s');
  });
});

describe('citation_checked messages', () => {
  const unverified = {
    v: 1,
    type: 'citation_checked',
    turn: 4,
    said: 'articulo 75 de la constitucion',
    article: '75',
    norm: 'constitucion',
    verified: false,
    source: null,
    call_id: null,
  };
  const verified = {
    ...unverified,
    said: 'articulo 12',
    article: '12',
    norm: null,
    verified: true,
    source: 'Artículo 12',
    call_id: 'c1',
  };

  it('parses a citation check, verified or not, with every field', () => {
    expect(parseResearchMessage(JSON.stringify(unverified))).toEqual({
      type: 'citation_checked',
      callId: null,
      turn: 4,
      said: 'articulo 75 de la constitucion',
      article: '75',
      norm: 'constitucion',
      verified: false,
      source: null,
    });
    expect(parseResearchMessage(JSON.stringify(verified))).toMatchObject({
      callId: 'c1',
      verified: true,
      source: 'Artículo 12',
      norm: null,
    });
    // source and call_id default to null on the worker's side; the page reads them absent the same way.
    const { source: _s, call_id: _c, ...bare } = unverified;
    expect(parseResearchMessage(JSON.stringify(bare))).toMatchObject({ source: null, callId: null });
  });

  it.each([
    ['a citation of an unknown version', { ...unverified, v: 2 }],
    ['a citation without said', { ...unverified, said: undefined }],
    ['a citation with blank said', { ...unverified, said: '  ' }],
    ['a citation with said longer than the worker sends', { ...unverified, said: 'a'.repeat(301) }],
    ['a citation without article', { ...unverified, article: undefined }],
    ['a citation with a numeric article', { ...unverified, article: 75 }],
    ['a citation with an article too long', { ...unverified, article: '1'.repeat(21) }],
    ['a citation with a numeric norm', { ...unverified, norm: 5 }],
    ['a citation whose verified is a string', { ...unverified, verified: 'false' }],
    ['a citation without verified', { ...unverified, verified: undefined }],
    ['a citation with a numeric call_id', { ...verified, call_id: 1 }],
    ['a citation with an object source', { ...verified, source: {} }],
    ['a citation with a fractional turn', { ...unverified, turn: 1.5 }],
    ['a citation without turn', { ...unverified, turn: undefined }],
  ])('rejects %s', (_name, message) => {
    expect(parseResearchMessage(JSON.stringify(message))).toBeNull();
    expect(feed([message])).toBe(initialResearchState);
  });

  it('keeps citation checks in arrival order, numbered, each repeat once, bounded', () => {
    const state = feed([started, completed, unverified, verified, unverified]);
    expect(state.citations?.map((c) => [c.seq, c.article, c.verified])).toEqual([
      [1, '75', false],
      [2, '12', true],
    ]);
    // The searches are untouched and the citation is not an outcome to announce.
    expect(state.entries).toHaveLength(1);
    expect(state.lastOutcome).toBe('c1');
    const many = Array.from({ length: MAX_CITATIONS + 3 }, (_, i) => ({ ...unverified, article: String(i) }));
    const bounded = feed(many).citations!;
    expect(bounded).toHaveLength(MAX_CITATIONS);
    expect(bounded[0]?.article).toBe('3');
    expect(bounded[bounded.length - 1]?.seq).toBe(MAX_CITATIONS + 3);
  });

  it('takes citation checks only from the agent, and forgets them on reset but not when the session ends', () => {
    expect(feed([unverified], person)).toBe(initialResearchState);
    const state = feed([unverified]);
    expect(researchReducer(state, { type: 'sessionEnded' }).citations).toHaveLength(1);
    expect(researchReducer(state, { type: 'reset' }).citations).toBeUndefined();
  });

  it("finds the card a verified citation came from: the source of its call whose citation it names", () => {
    const state = feed([started, completed]);
    const check = { verified: true, callId: 'c1', source: 'Artículo 12' };
    expect(citedSource(state.entries, check)).toEqual({ callId: 'c1', index: 0 });
    expect(citedSource(state.entries, { ...check, verified: false })).toBeNull();
    expect(citedSource(state.entries, { ...check, callId: 'c9' })).toBeNull();
    expect(citedSource(state.entries, { ...check, source: 'Artículo 13' })).toBeNull();
    expect(citedSource(state.entries, { ...check, callId: null })).toBeNull();
  });

  it('gives every card a citation links to an id that is valid and its own, whatever the call id', () => {
    expect(sourceCardId('call_1', 0)).toBe('fuente-call_5f_1-0');
    const ids = ['a b', 'a_20_b', 'a"b', '<x>', 'á', 'a-b'].map((c) => sourceCardId(c, 1));
    expect(new Set(ids).size).toBe(ids.length);
    for (const id of ids) expect(id).toMatch(/^[A-Za-z0-9_-]+$/);
  });
});
