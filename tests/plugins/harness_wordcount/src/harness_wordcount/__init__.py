"""wordcount: the smallest complete harness family, kept outside the harness package on purpose."""
