"""JSON API of the launch intake workflow (CONTRACT §7), on the same services as the pages."""
