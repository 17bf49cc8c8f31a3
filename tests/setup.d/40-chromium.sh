# Headless Chromium (Debian package) + Playwright's Python client for the leaderboard browser test.
# Playwright never downloads a browser: the test launches /usr/bin/chromium via executable_path.
if ! command -v chromium >/dev/null 2>&1; then
  for _try in 1 2 3 4 5 6 7 8 9 10; do  # other apt users may hold the dpkg lock for a while
    if (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) 2>/dev/null; then
      break
    fi
    sleep 15
  done
fi
if ! python -c "import playwright" >/dev/null 2>&1; then
  PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 python -m pip install -q playwright 2>&1 | grep -v -e WARNING -e "^$" || true
fi
command -v chromium >/dev/null 2>&1 || echo "warning: chromium is not installed; the leaderboard browser test will fail"
