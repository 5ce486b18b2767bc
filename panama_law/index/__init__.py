"""Index: the one SQLite file on disk holding every norm, its articles, passages, glosses and embeddings.

Owns the file's format and how it is read (`disk`), cutting articles into passages, the atomic writes that add,
replace or remove a norm (`store`), and the builds the commands run on first start or on import (`build`). It
takes parsed norms from ingest and knows nothing of how they are ranked or served.
"""
