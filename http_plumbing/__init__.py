"""The project's HTTP plumbing, beneath every app: the DRF exception handler, the input guards (NUL and
body-size middleware, the guarded JSON parsers, bounded pagination, the storable-text rule), the
invalid-token throttle and client address, the `<dotslug:…>` URL converter, and a service's
ValidationError put on the posted form. Django and DRF only, nothing of ours, so every app may import
it (issue 34.5)."""
