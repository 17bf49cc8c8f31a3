# LongShOTBench tests: PyAV (decodes video/audio, bundles FFmpeg) and espeak-ng (speech fixtures).
python -c "import av" 2>/dev/null || python -m pip install -q av 2>&1 | grep -v -e WARNING -e "^$" || true
if ! command -v espeak-ng >/dev/null 2>&1; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq espeak-ng >/dev/null 2>&1) \
    || echo "70-longshot: espeak-ng not installed; the speech fixture falls back to a tone" >&2
fi
