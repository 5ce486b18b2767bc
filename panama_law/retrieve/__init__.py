"""Retrieve: from a question to ranked articles, or to no source at all, over an index loaded in memory.

Owns the query's terms and the everyday lexicon, the rankings (BM25, article, passage and gloss embeddings) and
their fusion (`search.Searcher`, tuned by `SearchConfig`), and the abstain decision: weak evidence, or a question
set in another country (`scope`). It reads the index; it never writes it or speaks HTTP.
"""
