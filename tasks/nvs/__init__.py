"""Novel-view synthesis: held-out view rendering scored by PSNR, SSIM, LPIPS, depth and surface metrics."""
