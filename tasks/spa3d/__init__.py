"""3DSPA: reference-free video realism from 3D semantic point trajectories (tasks spa3d_pairs,
spa3d_ratings, spa3d_recon); see README.md."""
