"""WordNet for NLTK's METEOR, offline.

NLTK's METEOR matches synonyms through the ``wordnet`` corpus, which NLTK downloads from the
network (``nltk.download('wordnet')``, as PointLLM's evaluator does). Here nothing may be
downloaded, so:

1. an installed NLTK ``corpora/wordnet`` (any ``nltk.data.path`` entry) is used as it is;
2. otherwise Debian's ``wordnet-base`` + ``wordnet-sense-index`` packages (WordNet 3.0, the same
   database NLTK's corpus holds) are laid out as an NLTK corpus under
   ``$HARNESS_CACHE_DIR/nltk_data/corpora/wordnet``. Debian does not ship the ``lexnames`` file
   NLTK's reader needs; it is written from WordNet 3.0's documented list of the 45 lexicographer
   files (lexnames(5WN)), which only names synsets' lexicographer files and plays no part in METEOR.
3. with neither, :func:`load_wordnet` raises :class:`WordNetUnavailable` and METEOR is left out
   (never reported as 0).

The reader skips NLTK's WordNet-3.0-to-itself sense-key mapping (``map_wn``), which only serves the
multilingual OMW functions and costs ~15 s of start-up; synset lookups are unchanged.
"""

from __future__ import annotations

import os
import shutil
import warnings
from functools import lru_cache
from pathlib import Path
from typing import Any

DEBIAN_DIR = Path("/usr/share/wordnet")
FILES = ("data.adj", "data.adv", "data.noun", "data.verb", "index.adj", "index.adv", "index.noun",
         "index.verb", "adj.exc", "adv.exc", "noun.exc", "verb.exc", "index.sense")
LEXNAMES = (
    "adj.all adj.pert adv.all noun.Tops noun.act noun.animal noun.artifact noun.attribute noun.body "
    "noun.cognition noun.communication noun.event noun.feeling noun.food noun.group noun.location "
    "noun.motive noun.object noun.person noun.phenomenon noun.plant noun.possession noun.process "
    "noun.quantity noun.relation noun.shape noun.state noun.substance noun.time verb.body verb.change "
    "verb.cognition verb.communication verb.competition verb.consumption verb.contact verb.creation "
    "verb.emotion verb.motion verb.perception verb.possession verb.social verb.stative verb.weather adj.ppl"
).split()
_SYNTACTIC_CATEGORY = {"noun": 1, "verb": 2, "adj": 3, "adv": 4}


class WordNetUnavailable(RuntimeError):
    """No WordNet for METEOR: install Debian's wordnet-base and wordnet-sense-index."""


def cache_dir() -> Path:
    return Path(os.environ.get("HARNESS_CACHE_DIR", Path.home() / ".cache" / "harness"))


def build_from_debian(source: Path = DEBIAN_DIR, nltk_root: Path | None = None) -> Path:
    """Lay Debian's WordNet 3.0 files out as ``<nltk_root>/corpora/wordnet``; returns nltk_root.

    Files are copied, not linked: NLTK refuses paths that resolve outside its data roots."""
    nltk_root = nltk_root or cache_dir() / "nltk_data"
    target = nltk_root / "corpora" / "wordnet"
    missing = [f for f in FILES if not (source / f).exists()]
    if missing:
        raise WordNetUnavailable(
            f"WordNet files {', '.join(missing[:3])} not in {source}: "
            "apt-get install wordnet-base wordnet-sense-index (METEOR needs them)")
    if (target / "lexnames").exists() and all((target / f).exists() for f in FILES):
        return nltk_root
    tmp = target.with_name(f"wordnet.tmp{os.getpid()}")
    tmp.mkdir(parents=True, exist_ok=True)
    for f in FILES:
        shutil.copyfile(source / f, tmp / f)
    lines = [f"{i:02d}\t{name}\t{_SYNTACTIC_CATEGORY[name.split('.')[0]]}\n" for i, name in enumerate(LEXNAMES)]
    (tmp / "lexnames").write_text("".join(lines))
    if target.exists():
        shutil.rmtree(tmp)  # another process finished first
    else:
        tmp.rename(target)
    return nltk_root


def _reader_class() -> type:
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    class FastWordNet(WordNetCorpusReader):  # type: ignore[misc]
        def map_wn(self, version: str = "wordnet") -> Any:
            return None  # the loaded database *is* WordNet 3.0: the mapping is the identity

    return FastWordNet


@lru_cache(maxsize=1)
def load_wordnet() -> Any:
    """A WordNet corpus reader for ``meteor_score(..., wordnet=...)`` (loaded once per process)."""
    import nltk

    try:
        root: Any = nltk.data.find("corpora/wordnet")  # a directory or zip pointer
    except LookupError:
        nltk_root = build_from_debian()
        if str(nltk_root) not in nltk.data.path:
            nltk.data.path.append(str(nltk_root))
        root = str(nltk_root / "corpora" / "wordnet")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "multilingual functions not available": not used here
        return _reader_class()(root, None)
