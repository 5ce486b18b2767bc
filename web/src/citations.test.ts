import { describe, expect, it } from 'vitest';

import {
  anchorTurn,
  citationLabel,
  findSaid,
  fold,
  foldWithOffsets,
  linePieces,
  placeCitations,
  unverifiedMark,
  unverifiedNotice,
  type CitationView,
  type LineCitation,
} from './citations';
import { buildTranscript, type RawLine } from './transcript';

const user = (id: string, text: string, timestamp: number): RawLine => ({ id, speaker: 'user', text, timestamp, typed: false });
const agent = (id: string, text: string, timestamp: number): RawLine => ({
  id,
  speaker: 'agent',
  text,
  timestamp,
  typed: false,
  finalAttribute: 'true',
});

let seq = 0;
function check(over: Partial<CitationView>): CitationView {
  seq += 1;
  return {
    seq,
    turn: 1,
    said: 'articulo 75 de la constitucion',
    article: '75',
    norm: 'constitucion',
    verified: false,
    source: null,
    callId: null,
    ...over,
  };
}

describe('citation words, folded as the worker folds them', () => {
  it('folds citation text like the worker: lowercase, no accents, one space', () => {
    expect(fold('  El ARTÍCULO\t 75  de la Constitución ')).toBe('el articulo 75 de la constitucion');
    expect(fold('Señoría, Ley Nº 6')).toBe('senoria, ley no 6');
  });

  it('keeps, for each folded character of a citation, where it was written', () => {
    const text = 'Según  el Artículo 75';
    const { folded, starts, ends } = foldWithOffsets(text);
    const at = folded.indexOf('articulo');
    expect(text.slice(starts[at]!, ends[at + 'articulo'.length - 1]!)).toBe('Artículo');
  });

  it('finds the cited words as written, whatever their case, accents and spacing', () => {
    const text = 'Como dice el Artículo  75 de la Constitución, todos son iguales.';
    const span = findSaid(text, 'articulo 75 de la constitucion');
    expect(span).not.toBeNull();
    expect(text.slice(span!.start, span!.end)).toBe('Artículo  75 de la Constitución');
  });

  it('finds a citation only as whole words: "artículo 7" is not in "artículo 74"', () => {
    expect(findSaid('el artículo 74 dice', 'articulo 7')).toBeNull();
    const text = 'el artículo 74 y el artículo 7.';
    const span = findSaid(text, 'articulo 7');
    expect(span && [span.start, text.slice(span.start, span.end)]).toEqual([20, 'artículo 7']);
    expect(findSaid('sin citas', '')).toBeNull();
  });
});

describe('citation texts in Spanish', () => {
  it('names the cited article and its norm as a person reads them', () => {
    expect(citationLabel('75', 'constitucion')).toBe('artículo 75 de la Constitución');
    expect(citationLabel('3', 'ley 6 de 2002')).toBe('artículo 3 de la Ley 6 de 2002');
    expect(citationLabel('12-A', null)).toBe('artículo 12-A');
    expect(citationLabel('1', 'código civil')).toBe('artículo 1 de código civil');
    expect(unverifiedMark(citationLabel('75', 'constitucion'))).toBe(
      'artículo 75 de la Constitución: no verificado en las fuentes',
    );
    expect(unverifiedNotice('75', 'constitucion')).toBe(
      'La respuesta citó un artículo que no estaba en las fuentes: artículo 75 de la Constitución.',
    );
  });
});

describe('anchorTurn: which reply a turn’s citations are in', () => {
  const lines = [agent('hi', 'Hola.', 1), user('q1', '¿Qué dice?', 2), agent('a1', 'El artículo 75…', 3)];

  it('ties a citation turn to the reply being spoken', () => {
    expect(anchorTurn(lines, 1, new Map())).toBe(2);
    expect(anchorTurn([agent('hi', 'Hola.', 1)], 0, new Map())).toBe(Number.NEGATIVE_INFINITY);
  });

  it('keeps a citation turn where it was first tied', () => {
    expect(anchorTurn([...lines, user('q2', 'otra', 4)], 1, new Map([[1, 2]]))).toBe(2);
  });

  it('ties a citation cut off by the person to the reply they cut, not to their new line', () => {
    expect(anchorTurn([...lines, user('q2', 'espere', 4)], 1, new Map())).toBe(2);
  });

  it('ties a later turn whose reply is not on screen yet to the reply after the person’s newest line', () => {
    const later = [...lines, user('q2', 'otra pregunta', 4)];
    expect(anchorTurn(later, 2, new Map([[1, 2]]))).toBe(4);
  });
});

describe('placeCitations: where the transcript shows each citation', () => {
  const raw = [
    agent('hi', 'Hola. El artículo 75 de la Constitución trata de otra cosa.', 1),
    user('q1', '¿Qué dice la Constitución?', 2),
    agent('a1', 'Busco en las fuentes.', 3),
    agent('a2', 'Según el artículo 75 de la Constitución, sí.', 4),
    user('q2', 'Gracias', 5),
    agent('a3', 'De nada.', 6),
  ];
  const lines = buildTranscript(raw, 'listening');
  const anchors = new Map([[1, 2]]);

  it("marks an unverified citation on its words in that turn's reply, not in another turn's", () => {
    const placed = placeCitations(lines, [check({})], anchors);
    expect([...placed.keys()]).toEqual(['a2']);
    const [shown] = placed.get('a2')!;
    expect(lines.find((l) => l.id === 'a2')!.text.slice(shown!.start, shown!.end)).toBe(
      'artículo 75 de la Constitución',
    );
    expect(shown).toMatchObject({ verified: false, label: 'artículo 75 de la Constitución' });
  });

  it("marks a citation whose words are not in the reply at the end of the reply's latest line", () => {
    const placed = placeCitations(lines, [check({ said: 'articulo 80 de la constitucion', article: '80' })], anchors);
    const a2 = lines.find((l) => l.id === 'a2')!;
    expect(placed.get('a2')).toEqual([expect.objectContaining({ start: a2.text.length, end: a2.text.length })]);
  });

  it("marks a citation of a reply not on screen yet at the end of the agent's latest line", () => {
    const placed = placeCitations(lines.slice(0, 2), [check({})], new Map([[1, 2]]));
    expect([...placed.keys()]).toEqual(['hi']);
  });

  it('links a verified citation only when its card is on the page, and waits for an untied turn', () => {
    const withCard = check({ verified: true, source: 'Constitución, artículo 75', callId: 'c1', cardId: 'fuente-c1-0' });
    const withoutCard = check({ verified: true, source: 'Constitución, artículo 75', callId: 'c0' });
    const untied = check({ turn: 9 });
    const placed = placeCitations(lines, [withCard, withoutCard, untied], anchors);
    expect(placed.get('a2')).toEqual([expect.objectContaining({ verified: true, cardId: 'fuente-c1-0' })]);
    expect([...placed.values()].flat()).toHaveLength(1);
  });
});

describe('linePieces: a line cut around its citations', () => {
  const mark = (start: number, end: number, key = `k${start}`): LineCitation => ({
    key,
    start,
    end,
    verified: false,
    label: 'x',
  });

  it('keeps every character of the line once, in order, with each citation on its words', () => {
    const text = 'uno dos tres cuatro';
    const pieces = linePieces(text, [mark(8, 12), mark(0, 3)]);
    expect(pieces.map((p) => p.text).join('')).toBe(text);
    expect(pieces.filter((p) => p.citation).map((p) => p.text)).toEqual(['uno', 'tres']);
  });

  it('puts a citation on words already taken, or at the line end, as a mark without words', () => {
    const pieces = linePieces('uno dos', [mark(0, 3, 'a'), mark(0, 3, 'b'), mark(7, 7, 'c')]);
    expect(pieces.map((p) => [p.text, p.citation?.key])).toEqual([
      ['uno', 'a'],
      ['', 'b'],
      [' dos', undefined],
      ['', 'c'],
    ]);
  });
});
