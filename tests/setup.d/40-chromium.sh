# Headless Chromium (Debian package) for the leaderboard browser tests; Playwright's Python client
# comes with the `test` extra (00-python.sh). Playwright never downloads a browser: the tests launch
# /usr/bin/chromium via executable_path.
if ! command -v chromium >/dev/null 2>&1; then
  for _try in 1 2 3 4 5 6 7 8 9 10; do  # other apt users may hold the dpkg lock for a while
    if (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) 2>/dev/null; then
      break
    fi
    sleep 15
  done
fi
command -v chromium >/dev/null 2>&1 || setup_fail "apt-get install chromium"
python -c "import playwright" || setup_fail "playwright is not importable"
