# LongShOTBench tests: PyAV (decodes video/audio, bundles FFmpeg; the `video` extra) and espeak-ng
# (speech fixtures, Debian).
python -c "import av" || setup_fail "PyAV is not importable"
if ! command -v espeak-ng >/dev/null 2>&1; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq espeak-ng >/dev/null 2>&1) \
    || setup_fail "apt-get install espeak-ng"
fi
