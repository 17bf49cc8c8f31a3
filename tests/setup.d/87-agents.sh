# game agents (the agents family): the Crafter environment and its dependencies (the `agents` extra,
# installed through the lock by 00-python.sh); crafter ships its textures in the package. torch (CPU)
# for the VLA backends comes from 00-python.sh too.
if ! python -c "import crafter, imageio, opensimplex, ruamel.yaml" >/dev/null 2>&1; then
  pip_pinned "crafter==1.8.3" "imageio" "opensimplex" "ruamel.yaml"
  python -c "import crafter" || setup_fail "crafter is not importable"
fi
