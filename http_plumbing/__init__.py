"""The project's HTTP plumbing, beneath every app: the DRF exception handler, the input guards (NUL and
body-size middleware, the guarded JSON parsers, bounded pagination, the storable-text rule), the
invalid-token throttle and client address, and the `<dotslug:…>` URL converter. Django and DRF only,
nothing of ours, so every app may import it (issue 34.5)."""
