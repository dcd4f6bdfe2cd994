"""Scripts of CI and set-up; bench/footprint.py reuses the newcomer check's steps."""
