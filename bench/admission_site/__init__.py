"""A bench-only Django site: the real settings, plus a plain JSON view to compare the reserve view with."""
